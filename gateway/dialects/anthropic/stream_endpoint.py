"""``POST /v1/messages`` with ``"stream": true``.

    prepare (400/404) -> admit (429) -> upstream.stream -> hold-back -> MessageStreamEncoder

- Until the commit point (``gateway.dialects.sse``: a strict request's first output, else
  the upstream's first event) every failure is an ordinary HTTP error: a strict call still
  invalid before any text is a plain 422. Then ``message_start`` goes out with that
  output, and a later failure (422 after the correction, upstream dropped) is one
  ``event: error`` with the unified envelope and no ``message_stop``.
- A strict ``tool_use`` block is opened only once its input validated (the hold-back
  releases the whole call at once), so the raw SSE never carries invalid input.
- Retries: ``x-syntic-schema-retries`` cannot be known when headers go out; the final
  ``message_delta`` carries ``usage.schema_retries``, and the ledger row has it too.
- ``event: ping`` during silences longer than ``settings.stream_keepalive_s`` after the
  commit point (e.g. while a call after text is being corrected).
- A client disconnect cancels the pump: the hold-back cancels any correction in flight and
  closes the upstream stream; the ledger row gets status 499 ``client_disconnected``.

The stream machinery is shared with the chat-completions dialect (``gateway.dialects.sse``);
this module supplies the Messages bytes.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import Receive

from gateway.canonical import ChatRequest
from gateway.context import RequestContext
from gateway.dialects.anthropic.encode import message_id
from gateway.dialects.anthropic.stream import MessageStreamEncoder, error_event, ping_event
from gateway.dialects.sse import HeldSSEResponse, open_held_stream
from gateway.enforcement import ParamPaths
from gateway.enforcement.holdback import HeldEvent
from gateway.errors import GatewayError
from gateway.service import ChatService

__all__ = ["MessagesSSEResponse", "stream_messages"]


async def stream_messages(
    chat: ChatRequest,
    ctx: RequestContext,
    service: ChatService,
    receive: Receive,
    paths: ParamPaths,
    *,
    estimated_tokens: int,
    keepalive_s: float,
) -> Response:
    """Run the pre-stream part (errors are HTTP errors) and return the SSE response."""
    opened = await open_held_stream(
        service, chat, paths, ctx, receive, estimated_tokens=estimated_tokens
    )
    encoder = MessageStreamEncoder(model=chat.model, message_id=message_id(ctx.request_id))
    return MessagesSSEResponse(
        opened, encoder, ctx, service, estimated_tokens=estimated_tokens, keepalive_s=keepalive_s
    )


class MessagesSSEResponse(HeldSSEResponse[MessageStreamEncoder]):
    """The committed Messages stream (``message_start`` ... ``message_stop``, pings)."""

    def opening(self, first: list[HeldEvent]) -> bytes:
        return self.encoder.start() + self.encoder.encode_batch(first)

    def encode(self, batch: list[HeldEvent]) -> bytes:
        return self.encoder.encode_batch(batch)

    def closing(self) -> bytes:
        return self.encoder.finish()

    def error(self, exc: GatewayError, request_id: str) -> bytes:
        return error_event(exc, request_id)

    def keepalive(self) -> bytes:
        return ping_event()
