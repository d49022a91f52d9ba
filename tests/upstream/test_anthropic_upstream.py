"""The Anthropic upstream adapter against the scripted upstream's Messages side (real HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.canonical import (
    ChatRequest,
    Finish,
    ForcedTool,
    Message,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
    UsageReport,
)
from gateway.errors import UpstreamError, UpstreamTimeout
from gateway.settings import ModelConfig, Settings
from gateway.upstream.anthropic import ANTHROPIC_VERSION, AnthropicUpstream, create
from gateway.upstream.connection import Connections
from gateway.upstream.registry import UpstreamRegistry
from gateway.upstream.transport import UpstreamHttp
from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.scripted_upstream import Call, Drop, HttpError, Reply, ScriptedUpstream, Step

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
REQUEST = ChatRequest(
    model="claude",
    messages=(
        Message("system", (TextPart("be brief"),)),
        Message("user", (TextPart("hi"),)),
    ),
    tools=(ToolSpec("f", SCHEMA, strict=True),),
    max_tokens=100,
)


def _model(up: ScriptedUpstream, **kw: object) -> ModelConfig:
    return ModelConfig(
        name="claude",
        provider="anthropic",
        upstream_model="served-claude",
        base_url=up.base_url,
        api_key_env="ANTHROPIC_KEY",
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def messages_upstream(upstream: ScriptedUpstream) -> ScriptedUpstream:
    upstream.renderers["/messages"] = AnthropicRenderer()
    return upstream


@pytest.fixture
def adapter(upstream_http: UpstreamHttp) -> AnthropicUpstream:
    return AnthropicUpstream(upstream_http, {"ANTHROPIC_KEY": "sk-ant-upstream"})


async def _collect(it: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [e async for e in it]


async def test_complete(adapter: AnthropicUpstream, messages_upstream: ScriptedUpstream) -> None:
    messages_upstream.queue(
        Reply(content="ok", tool_calls=[Call("f", '{"a": [1]}', id="toolu_9")], usage=(7, 2))
    )
    r = await adapter.complete(REQUEST, _model(messages_upstream))
    assert (r.content, r.finish_reason, r.usage) == ("ok", "tool_calls", Usage(7, 2))
    assert r.tool_calls == (ToolCall("toolu_9", "f", '{"a":[1]}'),)
    rec = messages_upstream.requests[0]
    assert rec.path == "/v1/messages"
    assert rec.headers["x-api-key"] == "sk-ant-upstream"
    assert rec.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "authorization" not in rec.headers
    assert rec.body["model"] == "served-claude" and "stream" not in rec.body
    assert rec.body["system"] == "be brief"
    assert rec.body["max_tokens"] == 100


async def test_complete_without_api_key_env(
    adapter: AnthropicUpstream, messages_upstream: ScriptedUpstream
) -> None:
    messages_upstream.queue(Reply(content="ok"))
    model = ModelConfig(
        name="c", provider="anthropic", upstream_model="s", base_url=messages_upstream.base_url
    )
    await adapter.complete(REQUEST, model)
    assert "x-api-key" not in messages_upstream.requests[0].headers


async def test_correction_request_on_the_wire(
    adapter: AnthropicUpstream, messages_upstream: ScriptedUpstream
) -> None:
    """What the enforcement loop's correction looks like to an Anthropic upstream."""
    messages_upstream.queue(Reply(tool_calls=[Call("f", "{}")]))
    bad = ToolCall("toolu_1", "f", '{"x": 1')
    request = ChatRequest(
        model="claude",
        messages=(
            *REQUEST.messages,
            Message("assistant", tool_calls=(bad,)),
            Message("tool", (TextPart("fix it"),), tool_call_id="toolu_1", is_error=True),
        ),
        tools=REQUEST.tools,
        tool_choice=ForcedTool("f"),
    )
    await adapter.complete(request, _model(messages_upstream))
    body = messages_upstream.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "f"}
    assert body["messages"][1]["content"][0]["input"] == {"_raw_arguments": '{"x": 1'}
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "fix it"}],
        "is_error": True,
    }


async def test_stream_events(
    adapter: AnthropicUpstream, messages_upstream: ScriptedUpstream
) -> None:
    messages_upstream.queue(
        Reply(
            content="Hi there",
            tool_calls=[Call("f", '{"a": 12}', id="toolu_c"), Call("g", "", id="toolu_d")],
            fragment=4,
            usage=(3, 4),
        )
    )
    events = await _collect(adapter.stream(REQUEST, _model(messages_upstream)))
    assert events == [
        TextDelta("Hi t"),
        TextDelta("here"),
        ToolCallStart(0, "toolu_c", "f"),
        ToolCallDelta(0, '{"a"'),
        ToolCallDelta(0, ": 12"),
        ToolCallDelta(0, "}"),
        ToolCallStart(1, "toolu_d", "g"),
        ToolCallDelta(1, "{}"),
        Finish("tool_calls"),
        UsageReport(Usage(3, 4)),
    ]
    rec = messages_upstream.requests[0]
    assert rec.body["stream"] is True
    assert rec.headers["accept"] == "text/event-stream"


@pytest.mark.parametrize(
    ("step", "error", "text"),
    [
        (HttpError(500), UpstreamError, "scripted error 500"),
        (
            HttpError(
                401,
                body={
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "bad key"},
                },
            ),
            UpstreamError,
            "refused the gateway's credentials for this model (HTTP 401): bad key",
        ),
        (HttpError(502, body=b"<html>proxy</html>"), UpstreamError, "<html>proxy</html>"),
        (Drop(), UpstreamError, "connection"),
        (Reply(content="late", delay=1.0), UpstreamTimeout, "did not answer within 0.3s"),
    ],
    ids=["500", "401", "not-json", "reset", "timeout"],
)
async def test_complete_errors(
    adapter: AnthropicUpstream,
    messages_upstream: ScriptedUpstream,
    step: Step,
    error: type[Exception],
    text: str,
) -> None:
    messages_upstream.queue(step)
    with pytest.raises(error) as info:
        await adapter.complete(REQUEST, _model(messages_upstream, timeout_s=0.3))
    assert text in str(info.value)


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (HttpError(529), UpstreamError),
        (Reply(content="abcdefghijkl", fragment=2, drop_after=4), UpstreamError),
        (Reply(content="abcdefghijkl", fragment=2, stall_after=4), UpstreamTimeout),
    ],
    ids=["529", "dropped", "stalled"],
)
async def test_stream_errors(
    adapter: AnthropicUpstream,
    messages_upstream: ScriptedUpstream,
    step: Step,
    error: type[Exception],
) -> None:
    messages_upstream.queue(step)
    with pytest.raises(error):
        await _collect(adapter.stream(REQUEST, _model(messages_upstream, timeout_s=0.3)))


async def test_closing_the_stream_disconnects_upstream(
    adapter: AnthropicUpstream, messages_upstream: ScriptedUpstream
) -> None:
    messages_upstream.queue(Reply(content="x" * 100, fragment=1, chunk_delay=0.02))
    stream = adapter.stream(REQUEST, _model(messages_upstream))
    first = await stream.__anext__()
    assert first == TextDelta("x")
    await stream.aclose()  # type: ignore[attr-defined]
    # Wait off the loop: asyncio closes the socket in a callback on this loop.
    assert await asyncio.to_thread(messages_upstream.wait_for_disconnect, 0, 5)


async def test_registry_builds_the_anthropic_adapter(messages_upstream: ScriptedUpstream) -> None:
    settings = Settings(models=(_model(messages_upstream),), env={"ANTHROPIC_KEY": "k2"})
    client = UpstreamHttp(Connections({}))
    try:
        registry = UpstreamRegistry.build(settings, client)
        adapter = registry.get(settings.models[0])
        assert isinstance(adapter, AnthropicUpstream)
        assert isinstance(create(client, settings), AnthropicUpstream)
        messages_upstream.queue(Reply(content="ok"), Reply(content="ok"))
        await adapter.complete(REQUEST, settings.models[0])
        await registry.aclose()
        await adapter.complete(REQUEST, settings.models[0])  # the client belongs to the app
    finally:
        await client.aclose()
    assert messages_upstream.requests[0].headers["x-api-key"] == "k2"
