"""``POST /v1/chat/completions`` with ``"stream": true``.

    prepare (400/404) -> admit (429) -> upstream.stream -> hold-back -> ChunkEncoder -> SSE

- Until the commit point (``gateway.dialects.sse``: a strict request's first output, else
  the upstream's first event), every failure is an ordinary HTTP error with the unified
  envelope: a strict call still invalid before any text is a plain 422. Then headers and
  the ``delta.role`` chunk go out with that output, and a failure (422 after the
  correction, upstream dropped) is one in-band ``data: {"error": ...}`` event with no
  ``[DONE]``.
- ``x-syntic-schema-retries`` cannot be known when the headers go out, so streams do not
  send it. Billing finds the retries in the final usage chunk
  (``stream_options.include_usage``: ``usage.schema_retries``) and in the usage ledger
  (``schema_retries``, ``streamed = true``), which is written for every outcome.
- ``: keep-alive`` comments during silences longer than ``settings.stream_keepalive_s``
  after the commit point (e.g. while a call after text is being corrected).
- A client disconnect (``http.disconnect``) cancels the pump: the hold-back cancels any
  correction in flight and closes the upstream stream. The ledger row then has status 499,
  ``error_code = "client_disconnected"`` and the tokens so far (``estimated`` when the
  upstream had not reported usage yet).
- Backpressure: each batch is one ``send``; uvicorn's ``send`` waits while the socket's
  write buffer is full, so a slow client slows the upstream reads.

The stream machinery is shared with the Messages dialect (``gateway.dialects.sse``); this
module supplies the chat-completions bytes.
"""

from __future__ import annotations

import time

from starlette.responses import Response
from starlette.types import Receive

from gateway.canonical import ChatRequest, WireEvent
from gateway.context import RequestContext
from gateway.dialects.openai.decode import STREAM_OPTIONS_KEY
from gateway.dialects.openai.stream import KEEPALIVE, ChunkEncoder, error_event
from gateway.dialects.sse import HeldSSEResponse, open_held_stream
from gateway.enforcement import OPENAI_PATHS
from gateway.enforcement.holdback import HeldEvent
from gateway.errors import GatewayError
from gateway.service import ChatService


def include_usage(chat: ChatRequest) -> bool:
    options = chat.metadata.get(STREAM_OPTIONS_KEY) or {}
    return bool(options.get("include_usage")) if isinstance(options, dict) else False


async def stream_chat_completions(
    chat: ChatRequest,
    ctx: RequestContext,
    service: ChatService,
    receive: Receive,
    *,
    estimated_tokens: int,
    keepalive_s: float,
) -> Response:
    """Run the pre-stream part (errors are HTTP errors) and return the SSE response."""
    opened = await open_held_stream(
        service, chat, OPENAI_PATHS, ctx, receive, estimated_tokens=estimated_tokens
    )
    encoder = ChunkEncoder(
        completion_id="chatcmpl-" + ctx.request_id.removeprefix("req_"),
        model=chat.model,
        created=int(time.time()),
        include_usage=include_usage(chat),
        choices=chat.n,
    )
    return SSEResponse(
        opened, encoder, ctx, service, estimated_tokens=estimated_tokens, keepalive_s=keepalive_s
    )


class SSEResponse(HeldSSEResponse[ChunkEncoder]):
    """The committed chat-completions stream (``data:`` chunks, ``: keep-alive``)."""

    def opening(self, first: list[HeldEvent]) -> bytes:
        # The upstream's first chunk names its fingerprint and tier: the role chunk too.
        fields = [e for e in first if isinstance(e, WireEvent) and e.kind == "fields"]
        rest = [e for e in first if not (isinstance(e, WireEvent) and e.kind == "fields")]
        for event in fields:
            self.encoder.fields(event)
        return self.encoder.role() + self.encoder.encode(rest)

    def encode(self, batch: list[HeldEvent]) -> bytes:
        return self.encoder.encode(batch)

    def error(self, exc: GatewayError, request_id: str) -> bytes:
        return error_event(exc, request_id)

    def keepalive(self) -> bytes:
        return KEEPALIVE


__all__ = ["SSEResponse", "include_usage", "stream_chat_completions"]
