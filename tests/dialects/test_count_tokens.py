"""``POST /v1/messages/count_tokens`` through the anthropic SDK's ``messages.count_tokens``.

An ``an-*`` model forwards to its Anthropic upstream's own endpoint (what the scripted
upstream records is checked); an ``oa-*`` model is counted locally with the model's
OpenAI encoding and marked ``x-syntic-token-count: estimate``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import HttpError, Raw, ScriptedUpstream

MESSAGES: list[Any] = [{"role": "user", "content": "Order 582131 arrived crushed, refund it."}]
TOOL: dict[str, Any] = {
    "name": "create_refund",
    "description": "Refund part or all of an order.",
    "input_schema": {
        "type": "object",
        "properties": {"order_number": {"type": "string"}},
        "required": ["order_number"],
        "additionalProperties": False,
    },
}


@pytest.fixture
def gw(anthropic_gateway: GatewayProcess) -> GatewayProcess:
    return anthropic_gateway


@pytest.fixture
def counting(upstream: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    """The scripted upstream answering ``.../messages/count_tokens`` too."""
    upstream.renderers["/count_tokens"] = AnthropicRenderer()
    try:
        yield upstream
    finally:
        del upstream.renderers["/count_tokens"]


@pytest.fixture
def client(gw: GatewayProcess) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        yield c


def test_an_anthropic_upstream_counts(
    counting: ScriptedUpstream, client: anthropic.Anthropic
) -> None:
    counting.queue(Raw(b'{"input_tokens": 42}'))
    raw = client.messages.with_raw_response.count_tokens(
        model="an-plain",
        messages=MESSAGES,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        tools=[TOOL],  # type: ignore[list-item]
        extra_headers={"anthropic-beta": "token-counting-2024-11-01"},
    )
    assert raw.parse().input_tokens == 42
    assert raw.headers["x-syntic-token-count"] == "upstream"
    [sent] = counting.requests
    assert sent.path.endswith("/v1/messages/count_tokens")
    # the headers of a message: the client's own API version and beta flags (same wire)
    assert sent.headers["anthropic-version"] == raw.http_request.headers["anthropic-version"]
    assert sent.headers["anthropic-beta"] == "token-counting-2024-11-01"
    assert sent.body == {
        "model": "an-plain-served",
        "messages": MESSAGES,
        "tools": [TOOL],
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    }


def test_an_anthropic_upstreams_refusal_keeps_its_meaning(
    counting: ScriptedUpstream, client: anthropic.Anthropic
) -> None:
    counting.queue(
        HttpError(
            400,
            body={
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "messages.0.content: Field required",
                },
            },
        )
    )
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.count_tokens(model="an-plain", messages=MESSAGES)
    body = info.value.response.json()
    assert (body["type"], body["error"]["type"], body["error"]["code"]) == (
        "error",
        "invalid_request_error",
        "upstream_rejected",
    )
    assert body["error"]["message"] == "messages.0.content: Field required"
    assert len(counting.requests) == 1


def test_an_openai_model_is_an_estimate_from_its_encoding(
    upstream: ScriptedUpstream, client: anthropic.Anthropic
) -> None:
    short = client.messages.with_raw_response.count_tokens(model="oa-plain", messages=MESSAGES)
    assert short.headers["x-syntic-token-count"] == "estimate"
    long = client.messages.count_tokens(
        model="oa-plain",
        tools=[TOOL],  # type: ignore[list-item]
        messages=[
            *MESSAGES,
            {"role": "assistant", "content": "Which order?"},
            {"role": "user", "content": "582131, as I said."},
        ],
    )
    # the sentence is 10 tokens in o200k_base; 3 per message and 3 for the reply on top
    assert short.parse().input_tokens == 10 + 1 + 3 + 3
    assert long.input_tokens > short.parse().input_tokens + 20  # turns and the tool count
    assert upstream.requests == []  # nothing was sent upstream


def test_bad_requests_are_400s_before_any_upstream_call(
    gw: GatewayProcess, counting: ScriptedUpstream, client: anthropic.Anthropic
) -> None:
    for extra in ({"max_tokens": 10}, {"stream": True}):
        r = httpx.post(
            gw.base_url + "/v1/messages/count_tokens",
            timeout=20,
            content=orjson.dumps({"model": "an-plain", "messages": MESSAGES, **extra}),
            headers={"x-api-key": gw.api_key, "content-type": "application/json"},
        )
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == next(iter(extra))
        assert r.headers["x-should-retry"] == "false"
    with pytest.raises(anthropic.BadRequestError) as info:
        robot: Any = [{"role": "robot", "content": "x"}]
        client.messages.count_tokens(model="an-plain", messages=robot)
    assert info.value.response.json()["error"]["param"] == "messages[0].role"
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.count_tokens(model="no-such-model", messages=MESSAGES)
    assert missing.value.response.json()["error"]["type"] == "not_found_error"
    assert counting.requests == []


def test_it_needs_a_key(gw: GatewayProcess) -> None:
    with (
        anthropic.Anthropic(base_url=gw.base_url, api_key="sk_bad", max_retries=0) as bad,
        pytest.raises(anthropic.AuthenticationError),
    ):
        bad.messages.count_tokens(model="an-plain", messages=MESSAGES)
