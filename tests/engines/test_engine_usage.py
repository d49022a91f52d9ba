"""Usage an engine leaves out, counted with its own tokenizer (the profile's tokenize
endpoint; here ``llama-server``'s ``POST /tokenize`` on a scripted upstream): the
completion is the tokenizer's count of what came back, streamed or not, and the usage
stays marked ``estimated`` (the prompt misses the engine's chat template). A tokenizer
that fails or answers nonsense leaves the gateway's byte estimate, and the request
succeeds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import orjson
import pytest

from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import (
    OpenAIRenderer,
    Raw,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    Step,
)

ANSWER = "Oslo is cold in winter and mild in summer"  # nine words, 41 characters


@pytest.fixture(scope="module")
def usage_gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    scripted_upstream_server.renderers["/tokenize"] = OpenAIRenderer()
    tables = [model_table("server", scripted_upstream_server.base_url, engine="llama_cpp_server")]
    gw = start_gateway(tmp_path_factory.mktemp("engine-usage"), tables)
    try:
        yield gw
    finally:
        gw.stop()
        del scripted_upstream_server.renderers["/tokenize"]


def _responder(tokenize: Callable[[str], Step]) -> Callable[[RecordedRequest], Step]:
    def respond(request: RecordedRequest) -> Step:
        if request.path.endswith("/tokenize"):
            return tokenize(str(request.body["content"]))
        return Reply(content=ANSWER, report_usage=False)

    return respond


def _words(text: str) -> Step:
    """A tokenizer of one token per word."""
    return Raw(orjson.dumps({"tokens": list(range(len(text.split())))}))


def _usage(gw: GatewayProcess, stream: bool) -> Any:
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=30
    ) as client:
        messages: Any = [{"role": "user", "content": "Tell me about Oslo's weather."}]
        if not stream:
            completion = client.chat.completions.create(model="server", messages=messages)
            assert completion.choices[0].message.content == ANSWER
            return completion.usage
        chunks = list(
            client.chat.completions.create(
                model="server",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER
        return next(c.usage for c in chunks if c.usage is not None)


@pytest.mark.parametrize("stream", [False, True])
def test_usage_left_out_is_counted_with_the_engines_tokenizer(
    usage_gateway: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    upstream.responder = _responder(_words)
    usage = _usage(usage_gateway, stream)
    assert usage.completion_tokens == 9  # the tokenizer's count, not 41 characters / 4
    assert usage.prompt_tokens == 6  # "user", then the five words of the message
    assert (usage.model_extra or {}).get("estimated") is True
    tokenized = [r for r in upstream.requests if r.path.endswith("/tokenize")]
    assert [r.path for r in tokenized] == ["/tokenize", "/tokenize"]  # beside /v1, not in it


@pytest.mark.parametrize(
    "answer",
    [
        Raw(b"<html>not json</html>"),
        Raw(orjson.dumps({"tokens": "many"})),
        Raw(orjson.dumps({"error": "no"}), status=500),
    ],
    ids=["not-json", "not-a-list", "error-status"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_tokenizer_that_fails_leaves_the_estimate(
    usage_gateway: GatewayProcess, upstream: ScriptedUpstream, stream: bool, answer: Raw
) -> None:
    upstream.responder = _responder(lambda _text: answer)
    usage = _usage(usage_gateway, stream)
    assert (usage.model_extra or {}).get("estimated") is True
    assert usage.completion_tokens == (len(ANSWER) + 3) // 4  # the gateway's own estimate
