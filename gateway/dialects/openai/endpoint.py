"""``POST /v1/chat/completions``: bytes -> orjson -> decode -> service -> encode -> bytes."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.dialects.body import admitted_body, decoded_body, sized
from gateway.dialects.on_invalid_header import with_on_invalid_header
from gateway.dialects.openai.decode import decode_chat_request
from gateway.dialects.openai.encode import encode_chat_choices, encode_chat_response
from gateway.dialects.openai.stream_endpoint import stream_chat_completions
from gateway.dialects.strictify_header import with_strictify_header
from gateway.dialects.vendor_headers import vendor_headers
from gateway.enforcement import OPENAI_PATHS, strict_requested
from gateway.errors import GatewayError
from gateway.service import ChatService
from gateway.web import JsonResponse, request_context

_ITEMS = ("messages",)  # where max_input_items counts


async def chat_completions(request: Request) -> Response:
    ctx = request_context(request.scope)
    service: ChatService = request.app.service
    body, size = await admitted_body(request, service)
    headers = vendor_headers(request.scope["headers"])
    try:
        decoded = await decoded_body(
            service,
            body,
            size,
            _ITEMS,
            lambda data, members: decode_chat_request(data, headers, members),
        )
        chat = sized(
            service,
            with_on_invalid_header(request, with_strictify_header(request, decoded)),
            size,
        )
    except GatewayError:
        await service.refused_early(ctx)
        raise
    ctx.model = chat.model
    ctx.enforced = strict_requested(chat)
    if chat.stream:  # hold-back streaming
        return await stream_chat_completions(
            chat,
            ctx,
            service,
            request.receive,
            estimated_tokens=len(body) // 4 * chat.n,
            keepalive_s=service.settings.stream_keepalive_s,
        )
    estimate = len(body) // 4 * chat.n
    if chat.n > 1:
        results = await service.complete_choices(chat, ctx, OPENAI_PATHS, estimated_tokens=estimate)
        assert ctx.tally is not None
        payload = encode_chat_choices(
            results,
            usage=ctx.tally.total,
            model=chat.model,
            request_id=ctx.request_id,
            schema_retries=ctx.tally.retries,
        )
        return JsonResponse(orjson.dumps(payload))
    result = await service.complete(chat, ctx, OPENAI_PATHS, estimated_tokens=estimate)
    retries = ctx.tally.retries if ctx.tally else 0
    payload = encode_chat_response(
        result, model=chat.model, request_id=ctx.request_id, schema_retries=retries
    )
    return JsonResponse(orjson.dumps(payload))
