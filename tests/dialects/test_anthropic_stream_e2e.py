"""End to end: streaming ``/v1/messages`` with hold-back, through the official anthropic SDK
(``messages.stream`` helpers, sync and async) and on the raw SSE bytes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx
import pytest

from tests.support.fixtures import STREAM_KEEPALIVE_S as KEEPALIVE_S
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, HttpError, Reply, ScriptedUpstream

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
    },
    "required": ["order_number", "amount_pence"],
    "additionalProperties": False,
}
TOOL: Any = {"name": "create_refund", "strict": True, "input_schema": SCHEMA}
GOOD = {"order_number": "582131", "amount_pence": 1250}
GOOD_ARGS = json.dumps(GOOD)
BAD_ARGS = '{"order_number": "582131", "amount_pence": "12.50"}'
BAD_MARK = "12.50"  # appears in the invalid arguments only
MESSAGES: list[Any] = [{"role": "user", "content": "Refund order 582131."}]
PROVIDERS = ["oa", "an"]


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway  # shared: tests/support/fixtures.py


def sdk(gw: GatewayProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0)


def raw_stream(gw: GatewayProcess, **body: Any) -> tuple[httpx.Response, str]:
    """POST a streaming request with plain httpx; returns the response and every byte."""
    payload = {"max_tokens": 256, "messages": MESSAGES, "stream": True, **body}
    with httpx.stream(
        "POST",
        gw.base_url + "/v1/messages",
        json=payload,
        headers={"x-api-key": gw.api_key, "anthropic-version": "2023-06-01"},
        timeout=20,
    ) as resp:
        text = resp.read().decode()
    return resp, text


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        out.append((lines["event"], json.loads(lines["data"])))
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_valid_call_with_text_stream_helper(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(
        Reply(content="Refunding your order now.", tool_calls=[Call("create_refund", GOOD_ARGS)])
    )
    with (
        sdk(gw) as client,
        client.messages.stream(
            model=f"{provider}-strict", max_tokens=256, messages=MESSAGES, tools=[TOOL]
        ) as stream,
    ):
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Refunding your order now."
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].type == "tool_use" and final.content[1].input == GOOD
    assert final.stop_reason == "tool_use"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 5)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_corrected_call_never_leaks_invalid_bytes(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(
        Reply(
            content="Sure.",
            tool_calls=[Call("create_refund", BAD_ARGS, id="toolu_orig")],
            fragment=4,
        ),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="toolu_other")], usage=(20, 6)),
    )
    resp, text = raw_stream(gw, model=f"{provider}-strict", tools=[TOOL])
    assert resp.status_code == 200
    assert BAD_MARK not in text
    events = sse_events(text)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"]
    assert (starts[1]["id"], starts[1]["name"]) == ("toolu_orig", "create_refund")
    partial = "".join(
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == GOOD
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"] == {
        "input_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 11,
        "schema_retries": 1,
    }
    correction = upstream.requests[1].body
    choice = correction["tool_choice"]
    forced = choice["name"] if provider == "an" else choice["function"]["name"]
    assert forced == "create_refund"
    assert not correction.get("stream")  # the correction is one non-streamed call


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_twice_ends_with_error_event(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(
        Reply(content="Trying.", tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    resp, text = raw_stream(gw, model=f"{provider}-strict", tools=[TOOL])
    assert resp.status_code == 200
    assert BAD_MARK not in text
    events = sse_events(text)
    name, data = events[-1]
    assert name == "error"
    assert "message_stop" not in [n for n, _ in events]
    assert data["type"] == "error"
    assert (data["error"]["code"], data["error"]["param"]) == (
        "tool_arguments_invalid",
        "/amount_pence",
    )
    assert data["request_id"] == resp.headers["x-request-id"]
    # The SDK surfaces it as a status error carrying the same envelope (with the 200).
    upstream.queue(
        Reply(content="Trying.", tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    with (
        sdk(gw) as client,
        pytest.raises(anthropic.APIStatusError) as info,
        client.messages.stream(
            model=f"{provider}-strict", max_tokens=256, messages=MESSAGES, tools=[TOOL]
        ) as stream,
    ):
        stream.get_final_message()
    assert info.value.status_code == 200
    body: Any = info.value.body
    assert body["error"]["code"] == "tool_arguments_invalid"
    assert body["error"]["param"] == "/amount_pence"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_twice_before_any_output_is_a_plain_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    with (
        sdk(gw) as client,
        pytest.raises(anthropic.UnprocessableEntityError) as info,
        client.messages.stream(
            model=f"{provider}-strict", max_tokens=256, messages=MESSAGES, tools=[TOOL]
        ) as stream,
    ):
        stream.get_final_message()
    assert info.value.response.headers["x-should-retry"] == "false"
    body: Any = info.value.body
    assert (body["type"], body["error"]["type"]) == ("error", "invalid_request_error")
    assert body["error"]["code"] == "tool_arguments_invalid"
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_async_stream_parallel_calls_one_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    other = '{"order_number": "111111", "amount_pence": 5}'
    upstream.queue(
        Reply(
            tool_calls=[
                Call("create_refund", BAD_ARGS, id="c1"),
                Call("create_refund", other, id="c2"),
            ]
        ),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )

    async def run() -> Any:
        async with (
            anthropic.AsyncAnthropic(
                base_url=gw.base_url, api_key=gw.api_key, max_retries=0
            ) as client,
            client.messages.stream(
                model=f"{provider}-strict", max_tokens=256, messages=MESSAGES, tools=[TOOL]
            ) as stream,
        ):
            kinds = [event.type async for event in stream]
            return kinds, await stream.get_final_message()

    kinds, final = asyncio.run(run())
    assert "content_block_stop" in kinds
    assert [(b.id, b.input) for b in final.content if b.type == "tool_use"] == [
        ("c1", GOOD),
        ("c2", json.loads(other)),
    ]
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_json_output_stream_held_and_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    upstream.queue(
        Reply(content='{"answer": "12.50"}', fragment=3), Reply(content='{"answer": 42}')
    )
    resp, text = raw_stream(
        gw,
        model=f"{provider}-strict",
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    assert resp.status_code == 200
    assert BAD_MARK not in text
    events = sse_events(text)
    streamed = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert json.loads(streamed) == {"answer": 42}
    assert events[-2][1]["usage"]["schema_retries"] == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_upstream_error_before_first_byte_is_http_error(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(HttpError(503))
    with (
        sdk(gw) as client,
        pytest.raises(anthropic.InternalServerError) as info,
        client.messages.stream(
            model=f"{provider}-strict", max_tokens=10, messages=MESSAGES
        ) as stream,
    ):
        stream.get_final_message()
    assert info.value.status_code == 502


@pytest.mark.parametrize("provider", PROVIDERS)
def test_upstream_dropped_mid_stream(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(Reply(content="a long answer that will be cut", fragment=2, drop_after=5))
    resp, text = raw_stream(gw, model=f"{provider}-strict")
    assert resp.status_code == 200
    events = sse_events(text)
    assert events[0][0] == "message_start"
    name, data = events[-1]
    assert name == "error"
    assert data["error"]["type"] == "api_error"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_client_disconnect_cancels_upstream(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(Reply(content="x" * 200, fragment=1, stall_after=4))
    with httpx.stream(
        "POST",
        gw.base_url + "/v1/messages",
        json={
            "model": f"{provider}-strict",
            "max_tokens": 10,
            "messages": MESSAGES,
            "stream": True,
        },
        headers={"x-api-key": gw.api_key},
        timeout=20,
    ) as resp:
        first = next(resp.iter_bytes())
        assert b"message_start" in first
    assert upstream.wait_for_disconnect(0, timeout=10)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_pings_during_silence(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    # Upstream pings are not forwarded, so any ping here is the gateway's own keep-alive.
    upstream.queue(Reply(content="slow", fragment=2, chunk_delay=3 * KEEPALIVE_S))
    _, text = raw_stream(gw, model=f"{provider}-strict")
    events = sse_events(text)
    names = [name for name, _ in events]
    assert names.count("ping") >= 2
    assert names[-1] == "message_stop"
    streamed = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert streamed == "slow"
