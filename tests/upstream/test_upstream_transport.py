"""``UpstreamHttp`` (aiohttp's pool) under the OpenAI adapter, against the scripted upstream.

The retry policy trusts the error class: only ``UpstreamConnectError`` means the request
was never sent. These tests pin that mapping and run the adapter over the transport end to
end (JSON, SSE, gzip, error statuses, caps, cancellation).
"""

from __future__ import annotations

import asyncio
import gzip

import pytest

from gateway.canonical import ChatRequest, Message, StreamEvent, TextDelta, TextPart, Usage
from gateway.errors import UpstreamError, UpstreamTimeout
from gateway.settings import ModelConfig
from gateway.upstream.errors import (
    OutputTooLarge,
    UpstreamConnectError,
    UpstreamInvalidResponse,
    UpstreamStatusError,
)
from gateway.upstream.openai import OpenAIUpstream
from gateway.upstream.transport import UpstreamHttp
from tests.support.gateway_proc import free_port
from tests.support.scripted_upstream import Call, Drop, HttpError, Raw, Reply, ScriptedUpstream

REQUEST = ChatRequest(model="m", messages=(Message("user", (TextPart("hi"),)),))


def _model(base_url: str, **kw: object) -> ModelConfig:
    return ModelConfig(
        name="m",
        provider="openai",
        upstream_model="served",
        base_url=base_url,
        api_key_env="UP_KEY",
        **kw,  # type: ignore[arg-type]
    )


async def test_complete_and_reuse(upstream_http: UpstreamHttp, upstream: ScriptedUpstream) -> None:
    adapter = OpenAIUpstream(upstream_http, {"UP_KEY": "sk-upstream"})
    upstream.queue(
        Reply(content="one", usage=(7, 2)), Reply(tool_calls=[Call("f", '{"a": 1}', id="c1")])
    )
    first = await adapter.complete(REQUEST, _model(upstream.base_url))
    second = await adapter.complete(REQUEST, _model(upstream.base_url))
    assert (first.content, first.usage) == ("one", Usage(7, 2))
    assert [(c.id, c.name, c.raw_arguments) for c in second.tool_calls] == [("c1", "f", '{"a": 1}')]
    rec = upstream.requests[0]
    assert rec.headers["authorization"] == "Bearer sk-upstream"
    assert rec.headers["content-type"] == "application/json"
    assert rec.body["model"] == "served"


async def test_stream_arrives_in_pieces(
    upstream_http: UpstreamHttp, upstream: ScriptedUpstream
) -> None:
    adapter = OpenAIUpstream(upstream_http, {})
    upstream.queue(Reply(content="abcdef", fragment=2, chunk_delay=0.01))
    model = _model(upstream.base_url)
    events: list[StreamEvent] = [e async for e in adapter.stream(REQUEST, model)]
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("ab"),
        TextDelta("cd"),
        TextDelta("ef"),
    ]


async def test_refused_connection_is_a_connect_error(upstream_http: UpstreamHttp) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    adapter = OpenAIUpstream(upstream_http, {})
    with pytest.raises(UpstreamConnectError):
        await adapter.complete(REQUEST, _model(url))
    with pytest.raises(UpstreamConnectError):
        [e async for e in adapter.stream(REQUEST, _model(url))]


@pytest.mark.parametrize(
    ("step", "error", "stream"),
    [
        (HttpError(500), UpstreamStatusError, False),
        (Drop(), UpstreamError, False),
        (Reply(content="late", delay=1.0), UpstreamTimeout, False),
        (Raw(b"{not json"), UpstreamInvalidResponse, False),
        (Raw(b"garbage", headers={"content-encoding": "gzip"}), UpstreamInvalidResponse, False),
        (HttpError(503), UpstreamStatusError, True),
        (Reply(content="abcdefghijkl", fragment=2, drop_after=3), UpstreamError, True),
        (Reply(content="abcdefghijkl", fragment=2, stall_after=3), UpstreamTimeout, True),
    ],
    ids=[
        "500",
        "reset-after-send",
        "timeout",
        "not-json",
        "bad-gzip",
        "stream-503",
        "stream-dropped",
        "stream-stalled",
    ],
)
async def test_adapter_errors(
    upstream_http: UpstreamHttp,
    upstream: ScriptedUpstream,
    step: Reply,
    error: type[Exception],
    stream: bool,
) -> None:
    adapter = OpenAIUpstream(upstream_http, {})
    upstream.queue(step)
    model = _model(upstream.base_url, timeout_s=0.3)
    with pytest.raises(error) as info:
        if stream:
            [e async for e in adapter.stream(REQUEST, model)]
        else:
            await adapter.complete(REQUEST, model)
    # Sent, then failed: never classified as "not sent" (the retry policy relies on it).
    assert not isinstance(info.value, UpstreamConnectError)


async def test_closing_a_stream_disconnects_upstream(
    upstream_http: UpstreamHttp, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="x" * 100, fragment=1, chunk_delay=0.02))
    stream = OpenAIUpstream(upstream_http, {}).stream(REQUEST, _model(upstream.base_url))
    assert await stream.__anext__() == TextDelta("x")
    await stream.aclose()  # type: ignore[attr-defined]
    # Wait off the loop: asyncio closes the socket in a callback on this loop.
    assert await asyncio.to_thread(upstream.wait_for_disconnect, 0, 5)


COMPLETION = (
    b'{"id":"x","created":1,"model":"served","choices":[{"index":0,"message":'
    b'{"role":"assistant","content":"hello"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":1}}'
)


async def test_gzip_error_status_and_cap(
    upstream_http: UpstreamHttp, upstream: ScriptedUpstream
) -> None:
    """A gzip answer decoded, an error status with retry-after, a body over the cap (counted
    after decompression), and an error body over its cap cut, not failed."""
    adapter = OpenAIUpstream(upstream_http, {}, max_body_bytes=len(COMPLETION) + 10)
    model = _model(upstream.base_url)
    upstream.queue(
        Raw(gzip.compress(COMPLETION), headers={"content-encoding": "gzip"}),
        Raw(b'{"error": {"message": "slow down"}}', status=429, headers={"retry-after": "7"}),
        Raw(gzip.compress(COMPLETION + b" " * 64), headers={"content-encoding": "gzip"}),
        Raw(b'{"error": {"message": "busy"}}' + b" " * 200_000, status=503),
        Raw(COMPLETION),
    )
    assert (await adapter.complete(REQUEST, model)).content == "hello"
    with pytest.raises(UpstreamStatusError) as info:
        await adapter.complete(REQUEST, model)
    assert (info.value.upstream_status, info.value.retry_after_s) == (429, 7.0)
    assert "slow down" in str(info.value)
    with pytest.raises(OutputTooLarge, match="byte limit"):
        await adapter.complete(REQUEST, model)
    with pytest.raises(UpstreamStatusError) as busy:
        await adapter.complete(REQUEST, model)
    assert busy.value.upstream_status == 503 and "busy" in str(busy.value)
    assert (await adapter.complete(REQUEST, model)).content == "hello"
