"""``POST /v1/messages``: bytes -> orjson -> decode -> service -> encode -> bytes.

Same rules and codes as chat completions, through the same ``ChatService``; only the
spelling of ``param`` (``tools[i].input_schema...``) and the wire format differ. Auth
(``x-api-key`` or ``Authorization: Bearer``) is the shared middleware's; the
``anthropic-version`` header is accepted and not interpreted.

Streaming: the upstream's events go through the hold-back (a strict ``tool_use`` block is
opened only after its input validated) and ``MessageStreamEncoder``. Failures before the
upstream answered are ordinary HTTP errors; after that, one ``error`` event ends the
stream. ``ping`` events keep a silent stream (e.g. during a correction) alive.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.context import RequestContext, Tally
from gateway.dialects.anthropic.decode import DecodedRequest, decode_request
from gateway.dialects.anthropic.encode import encode_response, message_id
from gateway.dialects.anthropic.stream import MessageStreamEncoder, error_event, ping_event
from gateway.enforcement import ParamPaths, strict_requested
from gateway.enforcement.holdback import HeldEvent, HoldBack, holdback_for
from gateway.errors import GatewayError, InvalidRequest
from gateway.http import request_context
from gateway.service import ChatService

__all__ = ["PING_INTERVAL_S", "anthropic_paths", "messages"]

PING_INTERVAL_S = 10.0

_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def anthropic_paths(decoded: DecodedRequest) -> ParamPaths:
    """Where this dialect's schemas live, for the ``param`` of a 400."""
    return ParamPaths(
        tool_schema="tools[{i}].input_schema",
        tool_name="tools[{i}].name",
        response_schema=decoded.format_param or "output_config.format.schema",
        tools="tools",
    )


async def messages(request: Request) -> Response:
    ctx = request_context(request.scope)
    body = await request.body()
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(
            f"The request body is not valid JSON: {exc}.", code="invalid_json"
        ) from exc
    decoded = decode_request(data)
    chat = decoded.request
    ctx.model = chat.model
    ctx.enforced = strict_requested(chat)
    service: ChatService = request.app.state.service
    paths = anthropic_paths(decoded)
    estimate = len(body) // 4
    if chat.stream:
        return await _stream(service, decoded, ctx, paths, estimate)
    result = await service.complete(chat, ctx, paths, estimated_tokens=estimate)
    retries = ctx.tally.retries if ctx.tally else 0
    payload = encode_response(result, model=chat.model, schema_retries=retries)
    return Response(orjson.dumps(payload), media_type="application/json")


async def _aclose(it: AsyncIterator[list[HeldEvent]]) -> None:
    aclose = getattr(it, "aclose", None)
    if aclose is not None:
        await aclose()


async def _stream(
    service: ChatService,
    decoded: DecodedRequest,
    ctx: RequestContext,
    paths: ParamPaths,
    estimate: int,
) -> Response:
    chat = decoded.request
    ctx.streamed = True
    prepared = await service.prepare(chat, paths)
    await service.admit(ctx, estimate)
    if ctx.tally is None:
        ctx.tally = Tally()
    events = prepared.upstream.stream(prepared.upstream_request, prepared.model)
    hold = holdback_for(prepared.upstream_request, prepared.enforce_context(ctx.tally), events)
    batches = hold.batches()
    try:
        # Until the upstream answers, failures are ordinary HTTP errors (issue #4).
        first = await anext(batches)
    except BaseException:
        await _aclose(batches)
        hold.account_partial()
        await service.settle(ctx, estimate)
        raise
    encoder = MessageStreamEncoder(model=chat.model, message_id=message_id(ctx.request_id))
    return StreamingResponse(
        _body(service, ctx, hold, batches, first, encoder, estimate),
        media_type="text/event-stream",
        headers=_SSE_HEADERS,
    )


async def _body(
    service: ChatService,
    ctx: RequestContext,
    hold: HoldBack,
    batches: AsyncIterator[list[HeldEvent]],
    first: list[HeldEvent],
    encoder: MessageStreamEncoder,
    estimate: int,
) -> AsyncIterator[bytes]:
    pending: asyncio.Task[list[HeldEvent]] | None = None
    finished = False
    try:
        yield encoder.start() + encoder.encode_batch(first)
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(batches))
            done, _ = await asyncio.wait({pending}, timeout=PING_INTERVAL_S)
            if not done:
                yield ping_event()
                continue
            task, pending = pending, None
            try:
                batch = task.result()
            except StopAsyncIteration:
                break
            yield encoder.encode_batch(batch)
        finished = True
        yield encoder.finish()
    except GatewayError as exc:
        ctx.status = exc.status
        ctx.error_code = exc.code
        yield error_event(exc, ctx.request_id)
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        await _aclose(batches)
        if not finished and hold.account_partial():
            ctx.estimated = True
        await service.settle(ctx, estimate)
