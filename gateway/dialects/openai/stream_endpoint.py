"""``POST /v1/chat/completions`` with ``"stream": true`` (issue #4).

    prepare (400/404) -> admit (429) -> upstream.stream -> hold-back -> ChunkEncoder -> SSE

- Until the upstream has answered (its first event), every failure is an ordinary HTTP
  error with the unified envelope. After that the response is committed: headers and the
  ``delta.role`` chunk go out, and a failure (422 after the correction, upstream dropped)
  is one in-band ``data: {"error": ...}`` event with no ``[DONE]``.
- ``x-syntic-schema-retries`` cannot be known when the headers go out, so streams do not
  send it. Billing finds the retries in the final usage chunk
  (``stream_options.include_usage``: ``usage.schema_retries``) and in the usage ledger
  (``schema_retries``, ``streamed = true``), which is written for every outcome.
- ``: keep-alive`` comments during silences longer than ``settings.stream_keepalive_s``
  (e.g. while a held call is being corrected).
- A client disconnect (``http.disconnect``) cancels the pump: the hold-back cancels any
  correction in flight and closes the upstream stream. The ledger row then has status 499,
  ``error_code = "client_disconnected"`` and the tokens so far (``estimated`` when the
  upstream had not reported usage yet).
- Backpressure: each batch is one ``send``; uvicorn's ``send`` waits while the socket's
  write buffer is full, so a slow client slows the upstream reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.canonical import ChatRequest
from gateway.context import RequestContext, Tally
from gateway.dialects.openai.decode import STREAM_OPTIONS_KEY
from gateway.dialects.openai.stream import KEEPALIVE, ChunkEncoder, error_event
from gateway.enforcement import OPENAI_PATHS
from gateway.enforcement.holdback import HeldEvent, HoldBack, holdback_for
from gateway.errors import GatewayError
from gateway.service import ChatService

_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def include_usage(chat: ChatRequest) -> bool:
    options = chat.metadata.get(STREAM_OPTIONS_KEY) or {}
    return bool(options.get("include_usage")) if isinstance(options, dict) else False


async def stream_chat_completions(
    chat: ChatRequest,
    ctx: RequestContext,
    service: ChatService,
    *,
    estimated_tokens: int,
    keepalive_s: float,
) -> Response:
    """Run the pre-stream part (errors are HTTP errors) and return the SSE response."""
    ctx.streamed = True
    prepared = await service.prepare(chat, OPENAI_PATHS)
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
        await batches.aclose()
        hold.account_partial()
        await service.settle(ctx, estimated_tokens)
        raise
    ctx.enforced = False  # no retries header on a stream (see module docstring)
    encoder = ChunkEncoder(
        completion_id="chatcmpl-" + ctx.request_id.removeprefix("req_"),
        model=chat.model,
        created=int(time.time()),
        include_usage=include_usage(chat),
    )
    return SSEResponse(
        hold, batches, first, encoder, ctx, service, estimated_tokens, keepalive_s
    )


class SSEResponse(Response):
    """The committed stream: a pump, a disconnect watcher and a keep-alive timer (three
    tasks per stream, none per event)."""

    def __init__(
        self,
        hold: HoldBack,
        batches: AsyncGenerator[list[HeldEvent], None],
        first: list[HeldEvent],
        encoder: ChunkEncoder,
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
            await send({"type": "http.response.start", "status": 200,
                        "headers": self.raw_headers})
            self._last_send = loop.time()
            pump = asyncio.ensure_future(self._pump(send))
            watch = asyncio.ensure_future(_disconnected(receive))
            tasks = [pump, watch, asyncio.ensure_future(self._keepalive(send))]
            done, _ = await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
            disconnected = pump not in done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._batches.aclose()
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
        encode = self._encoder.encode
        try:
            await self._send_bytes(send, self._encoder.role() + encode(self._first))
            async for batch in self._batches:
                if batch:
                    await self._send_bytes(send, encode(batch))
            self._completed = True
        except GatewayError as exc:
            self._ctx.status = exc.status
            self._ctx.error_code = exc.code
            await self._send_bytes(send, error_event(exc, self._ctx.request_id))

    async def _keepalive(self, send: Send) -> None:
        loop = asyncio.get_running_loop()
        interval = self._keepalive_s
        while True:
            idle = loop.time() - self._last_send
            if idle >= interval:
                await self._send_bytes(send, KEEPALIVE)
                idle = 0.0
            await asyncio.sleep(interval - idle)


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


__all__ = ["SSEResponse", "include_usage", "stream_chat_completions"]
