"""``gateway.dialects.sse`` on its own: ``open_held_stream`` and ``HeldSSEResponse`` driven
as ASGI with a fake upstream stream, a toy dialect's bytes and recording send/receive.
Errors before and after the commit point, a disconnect, keep-alives, settling."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

import pytest

from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Finish,
    Message,
    StreamEvent,
    TextDelta,
    TextPart,
    Usage,
    UsageReport,
)
from gateway.context import RequestContext
from gateway.dialects.sse import SSE_HEADERS, HeldSSEResponse, open_held_stream
from gateway.enforcement import OPENAI_PATHS
from gateway.enforcement.holdback import FinalUsage, HeldEvent
from gateway.errors import GatewayError, NotFound
from gateway.keys.base import Principal
from gateway.ratelimit.base import RateDecision
from gateway.service import ChatService
from gateway.settings import ModelConfig, Settings
from gateway.upstream.errors import UpstreamStatusError
from gateway.upstream.registry import UpstreamRegistry

MODEL = ModelConfig(name="m", provider="openai", upstream_model="u")
Step = StreamEvent | GatewayError | asyncio.Event  # an Event: wait for it before going on


class StreamingUpstream:
    """Streams a script of events; a ``GatewayError`` is raised where it stands."""

    def __init__(self, *script: Step) -> None:
        self.script = script
        self.closed = asyncio.Event()  # set when the gateway closed the stream

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        raise AssertionError("streaming only")

    def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[StreamEvent]:
        try:
            for step in self.script:
                if isinstance(step, asyncio.Event):
                    await step.wait()
                elif isinstance(step, GatewayError):
                    raise step
                else:
                    yield step
        finally:
            self.closed.set()

    async def aclose(self) -> None:
        pass


class Limiter:
    def __init__(self) -> None:
        self.added: list[int] = []

    async def check(self, principal: Principal, tokens: int, requests: int = 1) -> RateDecision:
        return RateDecision(True)

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        self.added.append(tokens)


class ToySSE(HeldSSEResponse[None]):
    """A dialect whose bytes name what they carry."""

    def opening(self, first: list[HeldEvent]) -> bytes:
        return b"open\n" + self.encode(first)

    def encode(self, batch: list[HeldEvent]) -> bytes:
        out = b""
        for event in batch:
            if isinstance(event, TextDelta):
                out += b"text " + event.text.encode() + b"\n"
            elif isinstance(event, FinalUsage):
                out += b"usage %d\n" % event.usage.total_tokens
        return out

    def closing(self) -> bytes:
        return b"end\n"

    def error(self, exc: GatewayError, request_id: str) -> bytes:
        return f"error {exc.code} {request_id}\n".encode()

    def keepalive(self) -> bytes:
        return b"keepalive\n"


class Client:
    """ASGI receive/send for one response: records the body, can hang up on cue."""

    def __init__(self) -> None:
        self.messages: list[MutableMapping[str, Any]] = []
        self.gone = asyncio.Event()
        self.sent = asyncio.Event()  # set on every body message
        self.on_body: Callable[[bytes], None] = lambda body: None

    async def receive(self) -> MutableMapping[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.messages.append(message)
        if message["type"] == "http.response.body":
            self.sent.set()
            self.on_body(message["body"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])

    @property
    def ended(self) -> bool:
        last = self.messages[-1]
        return last["type"] == "http.response.body" and not last.get("more_body", False)


def chat(model: str = "m") -> ChatRequest:
    return ChatRequest(model=model, messages=(Message("user", (TextPart("hi"),)),), stream=True)


def setup(upstream: StreamingUpstream) -> tuple[ChatService, Limiter, RequestContext]:
    limiter = Limiter()
    service = ChatService(
        Settings(models=(MODEL,)), UpstreamRegistry({"openai": upstream}), limiter
    )
    ctx = RequestContext.start("req_sse", "/v1/chat/completions")
    ctx.principal = Principal("key_sse", "sse")
    return service, limiter, ctx


async def run(
    upstream: StreamingUpstream, client: Client, *, estimated: int = 10, keepalive_s: float = 60.0
) -> tuple[RequestContext, Limiter]:
    service, limiter, ctx = setup(upstream)
    opened = await open_held_stream(
        service, chat(), OPENAI_PATHS, ctx, client.receive, estimated_tokens=estimated
    )
    response = ToySSE(
        opened, None, ctx, service, estimated_tokens=estimated, keepalive_s=keepalive_s
    )
    await asyncio.wait_for(response({"type": "http"}, client.receive, client.send), 10)
    return ctx, limiter


async def test_a_completed_stream_is_framed_by_the_dialect_and_settled() -> None:
    client = Client()
    upstream = StreamingUpstream(
        TextDelta("a"), TextDelta("b"), Finish("stop"), UsageReport(Usage(7, 3))
    )
    ctx, limiter = await run(upstream, client, estimated=4)
    start = client.messages[0]
    assert (start["type"], start["status"], start["headers"]) == (
        "http.response.start",
        200,
        SSE_HEADERS,
    )
    assert client.body == b"open\ntext a\ntext b\nusage 10\nend\n"
    assert client.ended
    assert (ctx.status, ctx.error_code, ctx.streamed, ctx.estimated) == (0, None, True, False)
    assert not ctx.enforced  # no retries header once committed
    assert limiter.added == [10 - 4]
    assert upstream.closed.is_set()


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ((UpstreamStatusError("busy", upstream_status=500),), UpstreamStatusError),
        ((asyncio.CancelledError(),), asyncio.CancelledError),
    ],
    ids=["upstream-error", "cancelled"],
)
async def test_a_failure_before_the_first_event_is_raised_and_settled(
    script: tuple[BaseException, ...], error: type[BaseException]
) -> None:
    class Failing(StreamingUpstream):
        async def _events(self) -> AsyncIterator[StreamEvent]:
            try:
                raise script[0]
                yield  # an async generator that fails at its first step
            finally:
                self.closed.set()

    upstream = Failing()
    service, limiter, ctx = setup(upstream)
    with pytest.raises(error):
        await open_held_stream(
            service, chat(), OPENAI_PATHS, ctx, Client().receive, estimated_tokens=12
        )
    assert upstream.closed.is_set()
    assert ctx.tally is not None and ctx.tally.upstream_calls == 1
    # settled before the error goes out: the prompt counts as sent (its estimate), with
    # nothing generated, so the estimate already charged stands
    assert ctx.tally.total == Usage(12, 0, estimated=True)
    assert limiter.added == []


async def test_an_unknown_model_fails_before_any_stream() -> None:
    upstream = StreamingUpstream(TextDelta("never"))
    service, limiter, ctx = setup(upstream)
    with pytest.raises(NotFound):
        await open_held_stream(
            service, chat("nope"), OPENAI_PATHS, ctx, Client().receive, estimated_tokens=1
        )
    # counted by the limiter first, its estimated token given back
    assert not upstream.closed.is_set() and limiter.added == [-1]


async def test_a_failure_after_the_commit_is_one_in_band_error_event() -> None:
    client = Client()
    upstream = StreamingUpstream(
        TextDelta("partial"), UpstreamStatusError("gone", upstream_status=502)
    )
    ctx, limiter = await run(upstream, client, estimated=0)
    assert client.body == b"open\ntext partial\nerror upstream_error req_sse\n"
    assert client.ended  # the response still ends cleanly, without the closing bytes
    assert (ctx.status, ctx.error_code) == (502, "upstream_error")
    assert ctx.estimated  # no usage came: the tokens so far are estimated
    assert limiter.added == [2]  # "partial": 7 characters, about 2 tokens


async def test_a_client_disconnect_stops_the_stream_as_a_499() -> None:
    client = Client()
    never = asyncio.Event()
    upstream = StreamingUpstream(TextDelta("first"), never, TextDelta("unsent"))

    def hang_up_after_the_first_text(body: bytes) -> None:
        if b"text first" in body:
            client.gone.set()

    client.on_body = hang_up_after_the_first_text
    ctx, _ = await run(upstream, client)
    assert upstream.closed.is_set()  # the upstream stream was closed, not left waiting
    assert b"unsent" not in client.body
    assert not client.ended  # nothing more is sent to a client that has gone
    assert (ctx.status, ctx.error_code, ctx.estimated) == (499, "client_disconnected", True)


async def test_a_silent_upstream_gets_keep_alives_between_batches() -> None:
    client = Client()
    resume = asyncio.Event()
    upstream = StreamingUpstream(TextDelta("a"), resume, TextDelta("b"), Finish("stop"))
    keepalives = 0

    def resume_after_two_keepalives(body: bytes) -> None:
        nonlocal keepalives
        keepalives += body == b"keepalive\n"
        if keepalives == 2:
            resume.set()

    client.on_body = resume_after_two_keepalives
    await run(upstream, client, keepalive_s=0.02)
    assert client.body.startswith(b"open\ntext a\nkeepalive\nkeepalive\n")
    assert client.body.endswith(b"text b\nusage 11\nend\n")  # estimated: 10 + "ab"


async def test_a_busy_stream_sends_no_keep_alive() -> None:
    client = Client()
    script: list[Step] = [TextDelta(str(i)) for i in range(5)]
    upstream = StreamingUpstream(*script, Finish("stop"))
    await run(upstream, client, keepalive_s=30)
    assert b"keepalive" not in client.body
