"""What the gateway sends to engines the tests cannot run (vLLM, SGLang, Ollama), held to
each engine's own request model: ``fixtures/<engine>.json`` records, from the source file
and version it names, the request fields the engine declares, the ``tool_choice`` forms
and ``response_format`` types it reads, where its constrained output goes and whether an
assistant turn with tool calls may say ``content: null``. A field outside the model is
dropped unread by every one of them (pydantic's default, Go's decoder), so a constraint or
a limit sent there would silently constrain nothing.

The bodies are recorded by a scripted upstream behind a real gateway, from a chat client
(the client's own body, same wire) and from an Anthropic client (the codec's body)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Call, HttpError, Reply, ScriptedUpstream

FIXTURES = Path(__file__).parent / "fixtures"
ENGINES = ("vllm", "sglang", "ollama")
ORDER = {
    "type": "object",
    "properties": {"item": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
    "required": ["item", "quantity"],
    "additionalProperties": False,
}
OTHER = {"type": "object", "properties": {}, "additionalProperties": False}
TOOLS: Any = [
    {"type": "function", "function": {"name": "order", "parameters": ORDER, "strict": True}},
    {"type": "function", "function": {"name": "cancel", "parameters": OTHER, "strict": True}},
]
FORCED: Any = {"type": "function", "function": {"name": "order"}}
ASK: Any = [{"role": "user", "content": "Order 2 apples."}]
VALID = '{"item": "apple", "quantity": 2}'


def _fixture(engine: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{engine}.json").read_text())
    assert data["engine"] == engine and data["source"] and data["version"]
    return data


@pytest.fixture(scope="module")
def shapes_gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    base = scripted_upstream_server.base_url
    tables = []
    for engine in ENGINES:
        tables.append(model_table(f"{engine}-c", base, engine=engine, constrained=True))
        tables.append(model_table(f"{engine}-fix", base, engine=engine, correction="constrained"))
    gw = start_gateway(tmp_path_factory.mktemp("engine-shapes"), tables)
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def up(scripted_upstream_server: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    scripted_upstream_server.reset()
    yield scripted_upstream_server
    scripted_upstream_server.reset()


def _chat(gw: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=30
    )


def _declared(body: dict[str, Any], spec: dict[str, Any]) -> None:
    unread = set(body) - set(spec["request_fields"])
    assert not unread, f"{spec['engine']} does not read {sorted(unread)} ({spec['source']})"
    rf = body.get("response_format")
    if rf is not None:
        assert rf["type"] in spec["response_format_types"], rf
    choice = body.get("tool_choice")
    if choice is not None:
        form = "named" if isinstance(choice, dict) else choice
        assert form in spec["tool_choice"], choice
    for m in body["messages"]:
        if m.get("tool_calls") and m.get("content") is None:
            assert spec["assistant_content_null_with_tool_calls"], m


def _constrained_schema(body: dict[str, Any], spec: dict[str, Any]) -> Any:
    node: Any = body
    for key in spec["constrained_output"]:
        node = node[key]
    return node


@pytest.mark.parametrize("engine", ENGINES)
def test_a_strict_output_goes_in_the_engines_constrained_form(
    shapes_gateway: GatewayProcess, up: ScriptedUpstream, engine: str
) -> None:
    spec = _fixture(engine)
    up.queue(Reply(content='{"item": "apple", "quantity": 2}'))
    fmt: Any = {
        "type": "json_schema",
        "json_schema": {"name": "order", "schema": ORDER, "strict": True},
    }
    with _chat(shapes_gateway) as client:
        client.chat.completions.create(model=f"{engine}-c", messages=ASK, response_format=fmt)
    body = up.requests[0].body
    _declared(body, spec)
    assert _constrained_schema(body, spec)["properties"]["quantity"]["type"] == "integer"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_grammar_correction_uses_the_engines_field(
    shapes_gateway: GatewayProcess, up: ScriptedUpstream, engine: str
) -> None:
    """``correction = "constrained"``: the correction asks for the arguments as the reply,
    in the field the engine constrains, with the replayed bad call in a form it reads."""
    spec = _fixture(engine)
    up.queue(
        Reply(tool_calls=[Call("order", '{"item": "apple", "quantity": 0}')]), Reply(content=VALID)
    )
    with _chat(shapes_gateway) as client:
        completion = client.chat.completions.create(
            model=f"{engine}-fix", messages=ASK, tools=TOOLS, tool_choice=FORCED
        )
    calls = completion.choices[0].message.tool_calls
    assert calls is not None and calls[0].type == "function"
    assert calls[0].function.arguments == VALID
    for request in up.requests:
        _declared(request.body, spec)
    correction = up.requests[1].body
    assert "tools" not in correction
    assert _constrained_schema(correction, spec)["required"] == ["item", "quantity"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_named_choice_goes_in_a_form_the_engine_reads(
    shapes_gateway: GatewayProcess, up: ScriptedUpstream, engine: str
) -> None:
    spec = _fixture(engine)
    up.queue(Reply(tool_calls=[Call("order", VALID)]), Reply(tool_calls=[Call("order", VALID)]))
    with _chat(shapes_gateway) as client:
        client.chat.completions.create(
            model=f"{engine}-c", messages=ASK, tools=TOOLS, tool_choice=FORCED
        )
    with anthropic.Anthropic(
        base_url=shapes_gateway.base_url, api_key=shapes_gateway.api_key, max_retries=0, timeout=30
    ) as messages_client:
        messages_client.messages.create(
            model=f"{engine}-c",
            max_tokens=50,
            messages=ASK,
            tools=[
                {"name": "order", "input_schema": ORDER, "strict": True},
                {"name": "cancel", "input_schema": OTHER},
            ],
            tool_choice={"type": "tool", "name": "order"},
        )
    for request in up.requests:  # the chat client's body, then the codec's
        body = request.body
        _declared(body, spec)
        names = [t["function"]["name"] for t in body["tools"]]
        if "named" in spec["tool_choice"]:
            assert body["tool_choice"]["function"]["name"] == "order"
            assert names == ["order", "cancel"]
        else:  # no tool_choice at all: only the named tool goes
            assert "tool_choice" not in body and names == ["order"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_streamed_second_turn_reads_as_the_engine_takes_it(
    shapes_gateway: GatewayProcess, up: ScriptedUpstream, engine: str
) -> None:
    """The replayed call and ``stream_options`` as the engine's model declares them; the
    token limit in a field it reads (``max_tokens`` where ``max_completion_tokens`` is not)."""
    spec = _fixture(engine)
    up.queue(Reply(content="Done."))
    turn: Any = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "order", "arguments": VALID},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Ordered."},
    ]
    with _chat(shapes_gateway) as client:
        stream = client.chat.completions.create(
            model=f"{engine}-c",
            messages=turn,
            tools=TOOLS,
            stream=True,
            max_completion_tokens=20,
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Done."
    body = up.requests[0].body
    _declared(body, spec)
    assert body["stream_options"] == {"include_usage": True}
    limit = (
        "max_completion_tokens"
        if "max_completion_tokens" in spec["request_fields"]
        else "max_tokens"
    )
    assert body[limit] == 20


def test_an_engines_error_names_no_message_the_client_never_sent(
    shapes_gateway: GatewayProcess, up: ScriptedUpstream
) -> None:
    """The correction's turns come after the client's one message: an engine's error about
    them (here pydantic's location tuple and a bracketed index) does not send the client
    looking for a ``messages[1]`` or ``messages[2]`` it never had."""
    detail = (
        "2 validation errors: ('body', 'messages', 1, 'content') Input should be a "
        "valid string; messages[2].tool_call_id unknown; messages[0] is fine"
    )
    up.queue(
        Reply(tool_calls=[Call("order", '{"item": "apple", "quantity": 0}')]),
        HttpError(500, {"error": {"message": detail, "type": "internal_server_error"}}),
    )
    with _chat(shapes_gateway) as client, pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(
            model="vllm-c", messages=ASK, tools=TOOLS, tool_choice=FORCED
        )
    error = caught.value.response.json()["error"]
    assert (caught.value.status_code, error["code"]) == (502, "upstream_error")
    assert "messages', 1" not in error["message"] and "messages[2]" not in error["message"]
    assert "messages[0] is fine" in error["message"]
    assert error["message"].count("(a message the gateway added)") == 2
