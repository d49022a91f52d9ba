"""The app's upstream client (lean pool; httpx API over aiohttp's pool) against the scripted
upstream.

The retry policy trusts the httpx exception class: only ``ConnectError``/``ConnectTimeout``
mean the request was never sent. These tests pin that translation, and run the OpenAI
adapter over the transport end to end (JSON, SSE, errors, cancellation).
"""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.canonical import ChatRequest, Message, StreamEvent, TextDelta, TextPart, Usage
from gateway.errors import UpstreamError, UpstreamTimeout
from gateway.settings import ModelConfig
from gateway.upstream.openai import OpenAIUpstream
from gateway.upstream.retry import UpstreamConnectError, UpstreamStatusError
from gateway.upstream.transport import AiohttpTransport, pooled_client
from tests.support.gateway_proc import free_port
from tests.support.scripted_upstream import Call, Drop, HttpError, Raw, Reply, ScriptedUpstream

REQUEST = ChatRequest(model="m", messages=(Message("user", (TextPart("hi"),)),))


def _model(base_url: str, **kw: object) -> ModelConfig:
    return ModelConfig(name="m", provider="openai", upstream_model="served",
                       base_url=base_url, api_key_env="UP_KEY", **kw)  # type: ignore[arg-type]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    c = pooled_client(timeout_s=5.0)
    try:
        yield c
    finally:
        await c.aclose()


async def test_complete_and_reuse(client: httpx.AsyncClient, upstream: ScriptedUpstream) -> None:
    adapter = OpenAIUpstream(client, {"UP_KEY": "sk-upstream"})
    upstream.queue(Reply(content="one", usage=(7, 2)),
                   Reply(tool_calls=[Call("f", '{"a": 1}', id="c1")]))
    first = await adapter.complete(REQUEST, _model(upstream.base_url))
    second = await adapter.complete(REQUEST, _model(upstream.base_url))
    assert (first.content, first.usage) == ("one", Usage(7, 2))
    assert [(c.id, c.name, c.raw_arguments) for c in second.tool_calls] == [
        ("c1", "f", '{"a": 1}')]
    rec = upstream.requests[0]
    assert rec.headers["authorization"] == "Bearer sk-upstream"
    assert rec.headers["content-type"] == "application/json"
    assert rec.body["model"] == "served"


async def test_stream_arrives_in_pieces(
    client: httpx.AsyncClient, upstream: ScriptedUpstream
) -> None:
    adapter = OpenAIUpstream(client, {})
    upstream.queue(Reply(content="abcdef", fragment=2, chunk_delay=0.01))
    model = _model(upstream.base_url)
    events: list[StreamEvent] = [e async for e in adapter.stream(REQUEST, model)]
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("ab"), TextDelta("cd"), TextDelta("ef")]


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (Drop(), (httpx.RemoteProtocolError, httpx.ReadError)),
        (Reply(content="late", delay=1.0), (httpx.ReadTimeout,)),
    ],
    ids=["reset-after-send", "read-timeout"],
)
async def test_httpx_exception_classes(
    client: httpx.AsyncClient, upstream: ScriptedUpstream, step: object,
    expected: tuple[type[Exception], ...],
) -> None:
    upstream.queue(step)  # type: ignore[arg-type]
    with pytest.raises(httpx.HTTPError) as info:
        await client.post(upstream.base_url + "/chat/completions", content=b"{}",
                          timeout=httpx.Timeout(0.3))
    assert isinstance(info.value, expected), repr(info.value)
    # Sent, then failed: never classified as "not sent" (the retry policy relies on it).
    assert not isinstance(info.value, httpx.ConnectError | httpx.ConnectTimeout)


async def test_refused_connection_is_a_connect_error(client: httpx.AsyncClient) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(httpx.ConnectError):
        await client.post(url + "/chat/completions", content=b"{}")
    with pytest.raises(UpstreamConnectError):
        await OpenAIUpstream(client, {}).complete(REQUEST, _model(url))


@pytest.mark.parametrize(
    ("step", "error", "stream"),
    [
        (HttpError(500), UpstreamError, False),
        (Reply(content="late", delay=1.0), UpstreamTimeout, False),
        (HttpError(503), UpstreamError, True),
        (Reply(content="abcdefghijkl", fragment=2, drop_after=3), UpstreamError, True),
        (Reply(content="abcdefghijkl", fragment=2, stall_after=3), UpstreamTimeout, True),
    ],
    ids=["500", "timeout", "stream-503", "stream-dropped", "stream-stalled"],
)
async def test_adapter_errors(
    client: httpx.AsyncClient, upstream: ScriptedUpstream, step: Reply, error: type[Exception],
    stream: bool,
) -> None:
    adapter = OpenAIUpstream(client, {})
    upstream.queue(step)
    model = _model(upstream.base_url, timeout_s=0.3)
    with pytest.raises(error):
        if stream:
            [e async for e in adapter.stream(REQUEST, model)]
        else:
            await adapter.complete(REQUEST, model)


async def test_closing_a_stream_disconnects_upstream(
    client: httpx.AsyncClient, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="x" * 100, fragment=1, chunk_delay=0.02))
    stream = OpenAIUpstream(client, {}).stream(REQUEST, _model(upstream.base_url))
    assert await stream.__anext__() == TextDelta("x")
    await stream.aclose()  # type: ignore[attr-defined]
    # Wait off the loop: asyncio closes the socket in a callback on this loop.
    assert await asyncio.to_thread(upstream.wait_for_disconnect, 0, 5)


COMPLETION = (
    b'{"id":"x","created":1,"model":"served","choices":[{"index":0,"message":'
    b'{"role":"assistant","content":"hello"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":1}}'
)


@pytest.mark.parametrize("fast", [True, False], ids=["post_capped", "httpx-stream"])
async def test_complete_paths_agree(upstream: ScriptedUpstream, fast: bool) -> None:
    """The app's client (``post_capped``) and any other httpx client give the same
    outcomes: a gzip answer decoded, an error status with retry-after, a body over the cap."""
    client = pooled_client(timeout_s=5.0) if fast else httpx.AsyncClient()
    adapter = OpenAIUpstream(client, {}, max_body_bytes=len(COMPLETION) + 10)
    model = _model(upstream.base_url)
    try:
        upstream.queue(
            Raw(gzip.compress(COMPLETION), headers={"content-encoding": "gzip"}),
            Raw(b'{"error": {"message": "slow down"}}', status=429,
                headers={"retry-after": "7"}),
            Raw(COMPLETION + b" " * 64),
        )
        assert (await adapter.complete(REQUEST, model)).content == "hello"
        with pytest.raises(UpstreamStatusError) as info:
            await adapter.complete(REQUEST, model)
        assert (info.value.upstream_status, info.value.retry_after_s) == (429, 7.0)
        assert "slow down" in str(info.value)
        with pytest.raises(UpstreamError, match="byte limit"):
            await adapter.complete(REQUEST, model)
    finally:
        await client.aclose()


def test_serving_imports_no_aiohttp() -> None:
    """aiohttp (~10 MB per process) loads only for the httpx API; the gateway's own calls
    (both adapters) use the lean pool, so serving never imports it (#8)."""
    code = (
        "import sys\n"
        "import gateway.app, gateway.cli, gateway.commands.serve\n"
        "import gateway.upstream.anthropic, gateway.upstream.openai\n"
        "print('aiohttp' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


async def test_httpx_api_opens_aiohttp_on_first_use(
    client: httpx.AsyncClient, upstream: ScriptedUpstream
) -> None:
    transport = client._transport
    assert isinstance(transport, AiohttpTransport) and not transport.session_opened
    upstream.queue(Raw(COMPLETION))
    resp = await client.post(upstream.base_url + "/chat/completions", content=b"{}")
    assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"] == "hello"
    assert transport.session_opened
