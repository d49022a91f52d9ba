"""``POST /v1/responses`` with ``"stream": true``.

    prepare (400/404) -> admit (429) -> upstream.stream -> hold-back -> ResponseStreamEncoder

- Until the commit point (``gateway.dialects.sse``: a strict request's first output, else
  the upstream's first event) every failure is an ordinary HTTP error with the unified
  envelope: a strict call still invalid before any text is a plain 422. Then
  ``response.created`` goes out with that output, and a later failure (422 after the
  correction, upstream dropped) is ``response.failed`` and one ``error`` event with the
  envelope.
- A strict call's ``function_call`` item is added only once its arguments validated (the
  hold-back releases the whole call at once); text flows as it comes.
- ``x-syntic-schema-retries`` cannot be known when the headers go out: the final
  ``response.completed`` carries ``usage.schema_retries``, and the ledger row has it too.
- With ``store`` the finished response is stored before ``response.completed`` is sent,
  so the client can continue from it as soon as it has read that event.
- ``: keep-alive`` comments during silences longer than ``settings.stream_keepalive_s``
  after the commit point.

The stream machinery is the one both other dialects use (``gateway.dialects.sse``).
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import Receive

from gateway.canonical import ChatRequest
from gateway.context import RequestContext
from gateway.dialects.responses.decode import ResponsesRequest
from gateway.dialects.responses.encode import ResponseShape
from gateway.dialects.responses.stored import keep
from gateway.dialects.responses.stream import KEEPALIVE, ResponseStreamEncoder
from gateway.dialects.sse import HeldSSEResponse, OpenedStream, open_held_stream
from gateway.enforcement import ParamPaths
from gateway.enforcement.holdback import HeldEvent
from gateway.errors import GatewayError
from gateway.service import ChatService
from gateway.stored import ResponseStore

__all__ = ["ResponsesSSEResponse", "stream_response"]


async def stream_response(
    chat: ChatRequest,
    shape: ResponseShape,
    ctx: RequestContext,
    service: ChatService,
    receive: Receive,
    paths: ParamPaths,
    *,
    store: ResponseStore | None,
    decoded: ResponsesRequest,
    estimated_tokens: int,
) -> Response:
    """Run the pre-stream part (errors are HTTP errors) and return the SSE response."""
    opened = await open_held_stream(
        service, chat, paths, ctx, receive, estimated_tokens=estimated_tokens
    )
    return ResponsesSSEResponse(
        opened,
        ResponseStreamEncoder(shape),
        ctx,
        service,
        estimated_tokens=estimated_tokens,
        keepalive_s=service.settings.stream_keepalive_s,
        store=store,
        decoded=decoded,
        size=chat.body_bytes,
    )


class ResponsesSSEResponse(HeldSSEResponse[ResponseStreamEncoder]):
    """The committed Responses stream (``response.created`` ... ``response.completed``)."""

    def __init__(
        self,
        opened: OpenedStream,
        encoder: ResponseStreamEncoder,
        ctx: RequestContext,
        service: ChatService,
        *,
        estimated_tokens: int,
        keepalive_s: float,
        store: ResponseStore | None,
        decoded: ResponsesRequest,
        size: int = 0,
    ) -> None:
        super().__init__(
            opened,
            encoder,
            ctx,
            service,
            estimated_tokens=estimated_tokens,
            keepalive_s=keepalive_s,
        )
        self._store = store
        self._decoded = decoded
        self._request_ctx = ctx
        self._retention_s = service.settings.responses_retention_s
        self._offload = service.offload
        self._size = size  # the request's Offload.cost when large (its body_bytes)

    def opening(self, first: list[HeldEvent]) -> bytes:
        return self.encoder.start() + self.encoder.encode(first)

    def encode(self, batch: list[HeldEvent]) -> bytes:
        return self.encoder.encode(batch)

    async def aclosing(self) -> bytes:
        out = self.encoder.finish()
        if self._store is not None and self.encoder.final is not None:
            await keep(
                self._store,
                self._request_ctx,
                self._retention_s,
                self._decoded,
                self.encoder.final,
                self._offload,
                self._size,
            )
        return out

    def error(self, exc: GatewayError, request_id: str) -> bytes:
        return self.encoder.failed(exc, request_id)

    def keepalive(self) -> bytes:
        return KEEPALIVE
