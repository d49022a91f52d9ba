"""``POST /v1/messages`` with ``"stream": true`` (issues #4, #5).

    prepare (400/404) -> admit (429) -> upstream.stream -> hold-back -> MessageStreamEncoder

- Until the upstream answered (its first event) every failure is an ordinary HTTP error.
  Then the response is committed: ``message_start`` goes out, and a later failure (422
  after the correction, upstream dropped) is one ``event: error`` with the unified envelope
  and no ``message_stop``.
- A strict ``tool_use`` block is opened only once its input validated (the hold-back
  releases the whole call at once), so the raw SSE never carries invalid input.
- Retries: ``x-syntic-schema-retries`` cannot be known when headers go out; the final
  ``message_delta`` carries ``usage.schema_retries``, and the ledger row has it too.
- ``event: ping`` during silences longer than ``settings.stream_keepalive_s`` (e.g. while
  a held call is being corrected).
- A client disconnect cancels the pump: the hold-back cancels any correction in flight and
  closes the upstream stream; the ledger row gets status 499 ``client_disconnected``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.canonical import ChatRequest
from gateway.context import RequestContext, Tally
from gateway.dialects.anthropic.encode import message_id
from gateway.dialects.anthropic.stream import MessageStreamEncoder, error_event, ping_event
from gateway.enforcement import ParamPaths
from gateway.enforcement.holdback import HeldEvent, HoldBack, holdback_for
from gateway.errors import GatewayError
from gateway.service import ChatService

__all__ = ["MessagesSSEResponse", "stream_messages"]

_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


async def _aclose(it: AsyncIterator[list[HeldEvent]]) -> None:
    aclose = getattr(it, "aclose", None)
    if aclose is not None:
        await aclose()


async def stream_messages(
    chat: ChatRequest,
    ctx: RequestContext,
    service: ChatService,
    paths: ParamPaths,
    *,
    estimated_tokens: int,
    keepalive_s: float,
) -> Response:
    """Run the pre-stream part (errors are HTTP errors) and return the SSE response."""
    ctx.streamed = True
    prepared = await service.prepare(chat, paths)
    await service.admit(ctx, estimated_tokens)
    if ctx.tally is None:
        ctx.tally = Tally()
    events = prepared.upstream.stream(prepared.upstream_request, prepared.model)
    hold = holdback_for(prepared.upstream_request, prepared.enforce_context(ctx.tally), events)
    hold.prompt_tokens_estimate = estimated_tokens
    batches = hold.batches()
    try:
        first = await anext(batches)  # the upstream answered: commit point
    except BaseException:
        await _aclose(batches)
        hold.account_partial()
        await service.settle(ctx, estimated_tokens)
        raise
    ctx.enforced = False  # no retries header on a stream (see module docstring)
    encoder = MessageStreamEncoder(model=chat.model, message_id=message_id(ctx.request_id))
    return MessagesSSEResponse(
        hold, batches, first, encoder, ctx, service, estimated_tokens, keepalive_s
    )


class MessagesSSEResponse(Response):
    """The committed stream: a pump, a disconnect watcher and a ping timer."""

    def __init__(
        self,
        hold: HoldBack,
        batches: AsyncIterator[list[HeldEvent]],
        first: list[HeldEvent],
        encoder: MessageStreamEncoder,
        ctx: RequestContext,
        service: ChatService,
        estimated_tokens: int,
        keepalive_s: float,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_HEADERS)
        self._hold = hold
        self._batches = batches
        self._first = first
        self._encoder = encoder
        self._ctx = ctx
        self._service = service
        self._estimate = estimated_tokens
        self._keepalive_s = keepalive_s
        self._last_send = 0.0
        self._completed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Future[None]] = []
        disconnected = False
        try:
            start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
            await send(start)
            self._last_send = loop.time()
            pump = asyncio.ensure_future(self._pump(send))
            watch = asyncio.ensure_future(_disconnected(receive))
            tasks = [pump, watch, asyncio.ensure_future(self._ping(send))]
            done, _ = await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
            disconnected = pump not in done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await _aclose(self._batches)
            self._settle_outcome(disconnected)
            await self._service.settle(self._ctx, self._estimate)
        if not disconnected:
            pump.result()  # a bug in the pump surfaces here (logged as a 500)
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
        self._last_send = asyncio.get_running_loop().time()

    async def _pump(self, send: Send) -> None:
        enc = self._encoder
        try:
            await self._send_bytes(send, enc.start() + enc.encode_batch(self._first))
            async for batch in self._batches:
                if batch:
                    await self._send_bytes(send, enc.encode_batch(batch))
            self._completed = True
            await self._send_bytes(send, enc.finish())
        except GatewayError as exc:
            self._ctx.status = exc.status
            self._ctx.error_code = exc.code
            await self._send_bytes(send, error_event(exc, self._ctx.request_id))

    async def _ping(self, send: Send) -> None:
        loop = asyncio.get_running_loop()
        interval = self._keepalive_s
        while True:
            idle = loop.time() - self._last_send
            if idle >= interval:
                await self._send_bytes(send, ping_event())
                idle = 0.0
            await asyncio.sleep(interval - idle)


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
