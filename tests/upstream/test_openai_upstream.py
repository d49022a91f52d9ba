"""The OpenAI-compatible upstream adapter against the scripted upstream (real HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.canonical import (
    ChatRequest,
    Finish,
    Message,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
)
from gateway.errors import UpstreamError, UpstreamTimeout
from gateway.settings import ModelConfig
from gateway.upstream.openai import OpenAIUpstream
from gateway.upstream.transport import UpstreamHttp
from tests.support.scripted_upstream import Call, Drop, HttpError, Reply, ScriptedUpstream

REQUEST = ChatRequest(model="m", messages=(Message("user", (TextPart("hi"),)),))


def _model(up: ScriptedUpstream, **kw: object) -> ModelConfig:
    return ModelConfig(
        name="m",
        provider="openai",
        upstream_model="served",
        base_url=up.base_url,
        api_key_env="UP_KEY",
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def adapter(upstream_http: UpstreamHttp) -> OpenAIUpstream:
    return OpenAIUpstream(upstream_http, {"UP_KEY": "sk-upstream"})


async def test_complete(adapter: OpenAIUpstream, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="hello", usage=(7, 2)))
    r = await adapter.complete(REQUEST, _model(upstream))
    assert (r.content, r.finish_reason, r.usage) == ("hello", "stop", Usage(7, 2))
    rec = upstream.requests[0]
    assert rec.path == "/v1/chat/completions"
    assert rec.headers["authorization"] == "Bearer sk-upstream"
    assert rec.body["model"] == "served" and "stream" not in rec.body


async def _collect(it: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [e async for e in it]


async def test_stream_events(adapter: OpenAIUpstream, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(
            content="Hi there",
            tool_calls=[Call("f", '{"a": 12}', id="c9")],
            fragment=4,
            usage=(3, 4),
        )
    )
    events = await _collect(adapter.stream(REQUEST, _model(upstream)))
    assert events == [
        TextDelta("Hi t"),
        TextDelta("here"),
        ToolCallStart(0, "c9", "f"),
        ToolCallDelta(0, '{"a"'),
        ToolCallDelta(0, ": 12"),
        ToolCallDelta(0, "}"),
        Finish("tool_calls"),
        UsageReport(Usage(3, 4)),
    ]
    assert upstream.requests[0].body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (HttpError(500), UpstreamError),
        (HttpError(401, body={"error": {"message": "bad key"}}), UpstreamError),
        (Drop(), UpstreamError),
        (Reply(content="late", delay=1.0), UpstreamTimeout),
    ],
    ids=["500", "401", "reset", "timeout"],
)
async def test_complete_errors(
    adapter: OpenAIUpstream, upstream: ScriptedUpstream, step: object, error: type[Exception]
) -> None:
    upstream.queue(step)  # type: ignore[arg-type]
    with pytest.raises(error):
        await adapter.complete(REQUEST, _model(upstream, timeout_s=0.3))


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (HttpError(503), UpstreamError),
        (Reply(content="abcdefghijkl", fragment=2, drop_after=3), UpstreamError),
        (Reply(content="abcdefghijkl", fragment=2, stall_after=3), UpstreamTimeout),
    ],
    ids=["503", "dropped", "stalled"],
)
async def test_stream_errors(
    adapter: OpenAIUpstream, upstream: ScriptedUpstream, step: Reply, error: type[Exception]
) -> None:
    upstream.queue(step)
    with pytest.raises(error):
        await _collect(adapter.stream(REQUEST, _model(upstream, timeout_s=0.3)))


async def test_closing_the_stream_disconnects_upstream(
    adapter: OpenAIUpstream, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="x" * 100, fragment=1, chunk_delay=0.02))
    stream = adapter.stream(REQUEST, _model(upstream))
    first = await stream.__anext__()
    assert first == TextDelta("x")
    await stream.aclose()  # type: ignore[attr-defined]
    # Wait off the loop: asyncio closes the socket in a callback on this loop.
    assert await asyncio.to_thread(upstream.wait_for_disconnect, 0, 5)
