"""What the three dialects' streaming endpoints share: opening a held stream and the
committed SSE response around it. A dialect supplies only its bytes.

    opened = await open_held_stream(service, chat, paths, ctx, receive, estimated_tokens=n)
    return MyDialectSSE(opened, ctx, service, estimated_tokens=n, keepalive_s=15.0)

- ``open_held_stream``: prepare (400/404) -> admit (429) -> ``upstream.stream`` ->
  hold-back, up to the commit point. A failure before it is an ordinary HTTP error (the
  tally and rate limiter are settled first): a strict call still invalid after its
  correction is a plain ``422`` with ``x-should-retry: false``, not a 200 stream.
- The commit point: for a strict request (``refusable``: a strict tool or a strict
  output) the first batch that shows output (``until_output``): text releases the
  preamble at once, a strict call only once it validated or was corrected. For any other
  request, the upstream's first event. Nothing is sent before it, not even a keep-alive
  (any byte would commit the 200); the request deadline bounds the wait.
  ``x-syntic-schema-retries`` is not sent on a committed stream (streams report retries
  in their final usage and the ledger); a refused one has it, as a non-streamed 422.
- ``HeldSSEResponse``: one extra task per stream, none per event: the pump runs in the
  request's task (one ``send`` per batch, so a slow client slows the upstream reads), a
  ``DisconnectWatch`` (started before the hold) cancels it, and a timer starts a
  keep-alive send after a silence of ``keepalive_s``. A ``GatewayError`` after the
  commit is one in-band error event. A client disconnect, held or committed, cancels the
  work (the hold-back cancels corrections in flight and closes the upstream); the ledger
  row then has status 499 ``client_disconnected`` and the tokens so far (``estimated`` if
  unreported). Subclasses define ``opening``, ``encode``, ``closing`` (or ``aclosing``),
  ``error`` and ``keepalive``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Generic, TypeVar

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.canonical import ChatRequest
from gateway.canonical.record import record
from gateway.context import RequestContext, Tally
from gateway.dialects.disconnect import DisconnectWatch
from gateway.enforcement import ParamPaths
from gateway.enforcement.choices import ChoiceStreams
from gateway.enforcement.holdback import HeldEvent, HoldBack, holdback_for, until_output
from gateway.errors import GatewayError, UpstreamTimeout
from gateway.service import ChatService

__all__ = ["SSE_HEADERS", "HeldSSEResponse", "OpenedStream", "open_held_stream"]

E = TypeVar("E")  # the dialect's stream encoder

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


@record
class OpenedStream:
    """A stream past its commit point: the hold-back, its batches, what the preamble was
    held behind, and the watch the response takes over."""

    hold: HoldBack | ChoiceStreams
    batches: AsyncGenerator[list[HeldEvent], None]
    first: list[HeldEvent]
    watch: DisconnectWatch


async def open_held_stream(
    service: ChatService,
    chat: ChatRequest,
    paths: ParamPaths,
    ctx: RequestContext,
    receive: Receive,
    *,
    estimated_tokens: int,
) -> OpenedStream:
    """Run the pre-stream part (errors are HTTP errors) up to the commit point."""
    ctx.streamed = True
    prepared = await service.admitted(chat, paths, ctx, estimated_tokens)
    if ctx.tally is None:
        ctx.tally = Tally()
    holds = []
    for _ in range(chat.n):  # n > 1: one upstream stream per choice (chat completions)
        events = prepared.upstream.stream(prepared.upstream_request, prepared.model)
        one = holdback_for(prepared.upstream_request, prepared.enforce_context(ctx.tally), events)
        one.prompt_tokens_estimate = estimated_tokens // chat.n
        holds.append(one)
    hold: HoldBack | ChoiceStreams = holds[0] if chat.n == 1 else ChoiceStreams(holds, ctx.tally)
    batches = hold.batches()
    watch = DisconnectWatch(receive)
    try:
        if hold.refusable:
            first = await until_output(batches)  # a 422 here is still an HTTP answer
        else:
            first = await anext(batches)  # the upstream answered
    except BaseException as exc:
        watch.disarm()
        left = isinstance(exc, asyncio.CancelledError) and watch.consumed()
        await watch.stop()
        await batches.aclose()
        if hold.account_partial():
            ctx.estimated = True
        await service.settle(ctx, estimated_tokens)
        if left:
            raise ClientDisconnect() from None  # recorded as 499 client_disconnected
        raise
    ctx.enforced = False  # no retries header on a stream (see module docstring)
    return OpenedStream(hold, batches, first, watch)


class HeldSSEResponse(Response, Generic[E]):
    """The committed stream: the pump, a disconnect watcher and a keep-alive timer.
    ``encoder`` is the dialect's (``self.encoder`` in the byte methods)."""

    def __init__(
        self,
        opened: OpenedStream,
        encoder: E,
        ctx: RequestContext,
        service: ChatService,
        *,
        estimated_tokens: int,
        keepalive_s: float,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = list(SSE_HEADERS)
        self._hold = opened.hold
        self._batches = opened.batches
        self._first = opened.first
        self._watch = opened.watch
        self._loop = opened.watch.loop  # the request's loop, without another lookup
        self.encoder = encoder
        self._ctx = ctx
        self._service = service
        self._estimate = estimated_tokens
        self._keepalive_s = keepalive_s
        self._last_send = 0.0
        self._completed = False
        self._keepalive_timer: asyncio.TimerHandle | None = None
        self._keepalive_task: asyncio.Future[None] | None = None

    # -- the dialect's bytes ------------------------------------------------------------

    def opening(self, first: list[HeldEvent]) -> bytes:
        """The first bytes after the headers, with the first batch encoded."""
        raise NotImplementedError

    def encode(self, batch: list[HeldEvent]) -> bytes:
        raise NotImplementedError

    def closing(self) -> bytes:
        """Sent after the last batch of a completed stream (b"": nothing)."""
        return b""

    async def aclosing(self) -> bytes:
        """``closing``, for a dialect with work to finish first (storing the response)."""
        return self.closing()

    def error(self, exc: GatewayError, request_id: str) -> bytes:
        """The in-band error event for a failure after the commit point."""
        raise NotImplementedError

    def keepalive(self) -> bytes:
        raise NotImplementedError

    # -- the stream ---------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The pump runs in this task (a task and an ``asyncio.wait`` per stream fewer);
        # the watch cancels it on a disconnect; keep-alives come from a timer that starts
        # a send only when the stream has been silent for ``keepalive_s``.
        watch = self._watch
        watch.follow()
        try:
            try:
                await send(
                    {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                )
                self._last_send = self._loop.time()
                self._arm_keepalive(send)
                await self._pump(send)
            except asyncio.CancelledError:
                if not watch.consumed():
                    raise
            finally:
                watch.disarm()
        finally:
            if self._keepalive_timer is not None:
                self._keepalive_timer.cancel()
                self._keepalive_timer = None
            if self._keepalive_task is not None:
                self._keepalive_task.cancel()
                await asyncio.gather(self._keepalive_task, return_exceptions=True)
            await watch.stop()
            await self._batches.aclose()
            self._settle_outcome(watch.disconnected)
            await self._service.settle(self._ctx, self._estimate)
        if not watch.disconnected:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _settle_outcome(self, disconnected: bool) -> None:
        ctx = self._ctx
        if disconnected and not self._completed:
            ctx.status = 499
            ctx.error_code = "client_disconnected"
        if not self._completed and self._hold.account_partial():
            ctx.estimated = True

    async def _send_bytes(self, send: Send, body: bytes) -> None:
        await send({"type": "http.response.body", "body": body, "more_body": True})
        self._last_send = self._loop.time()

    async def _pump(self, send: Send) -> None:
        # The request deadline bounds a stream too, however steadily the upstream sends.
        remaining = self._ctx.remaining_s()
        when = None if remaining is None else self._loop.time() + remaining
        try:
            async with asyncio.timeout_at(when):  # the loop's time: one lookup fewer
                await self._send_all(send)
        except TimeoutError:
            await self._send_error(
                send, UpstreamTimeout("The stream did not complete within the request deadline.")
            )
        except GatewayError as exc:
            await self._send_error(send, exc)

    async def _send_all(self, send: Send) -> None:
        encode = self.encode
        await self._send_bytes(send, self.opening(self._first))
        async for batch in self._batches:
            if batch:
                await self._send_bytes(send, encode(batch))
        self._completed = True
        closing = await self.aclosing()
        if closing:
            await self._send_bytes(send, closing)

    async def _send_error(self, send: Send, exc: GatewayError) -> None:
        self._ctx.status = exc.status
        self._ctx.error_code = exc.code
        await self._send_bytes(send, self.error(exc, self._ctx.request_id))

    def _arm_keepalive(self, send: Send) -> None:
        """Check for silence every ``keepalive_s``; a keep-alive is sent only after one."""
        loop = self._loop
        interval = self._keepalive_s

        def tick() -> None:
            idle = loop.time() - self._last_send
            if idle >= interval:
                sending = self._keepalive_task
                if sending is None or sending.done():
                    self._keepalive_task = loop.create_task(
                        self._send_bytes(send, self.keepalive())
                    )
                idle = 0.0
            self._keepalive_timer = loop.call_later(interval - idle, tick)

        self._keepalive_timer = loop.call_later(interval, tick)
