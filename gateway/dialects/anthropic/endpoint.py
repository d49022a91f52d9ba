"""``POST /v1/messages``: bytes -> orjson -> decode -> service -> encode -> bytes.

Same rules and codes as chat completions, through the same ``ChatService``; only the
spelling of ``param`` (``tools[i].input_schema...``) and the wire format differ. Auth
(``x-api-key`` or ``Authorization: Bearer``) is the shared middleware's; the
``anthropic-version`` header is accepted and not interpreted.

Streaming (``stream_endpoint``): the upstream's events go through the hold-back (a strict
``tool_use`` block is opened only after its input validated) and ``MessageStreamEncoder``.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.dialects.anthropic.decode import DecodedRequest, decode_request
from gateway.dialects.anthropic.encode import encode_response
from gateway.dialects.anthropic.stream_endpoint import stream_messages
from gateway.dialects.body import admitted_body, decoded_body, sized
from gateway.dialects.on_invalid_header import with_on_invalid_header
from gateway.dialects.strictify_header import with_strictify_header
from gateway.dialects.vendor_headers import vendor_headers
from gateway.enforcement import ParamPaths, strict_requested
from gateway.errors import GatewayError
from gateway.service import ChatService
from gateway.web import JsonResponse, request_context

__all__ = ["ITEMS", "anthropic_paths", "messages"]

ITEMS = ("system", "messages")  # where max_input_items counts


def anthropic_paths(decoded: DecodedRequest) -> ParamPaths:
    """Where this dialect's schemas live, for the ``param`` of a 400."""
    return ParamPaths(
        tool_schema="tools[{i}].input_schema",
        tool_name="tools[{i}].name",
        response_schema=decoded.format_param or "output_config.format.schema",
        tools="tools",
        dialect="anthropic",
    )


async def messages(request: Request) -> Response:
    ctx = request_context(request.scope)
    service: ChatService = request.app.service
    body, size = await admitted_body(request, service)
    headers = vendor_headers(request.scope["headers"])
    try:
        decoded = await decoded_body(
            service, body, size, ITEMS, lambda data, members: decode_request(data, headers, members)
        )
        strict = with_strictify_header(request, decoded.request)
        chat = sized(service, with_on_invalid_header(request, strict), size)
    except GatewayError:
        await service.refused_early(ctx)
        raise
    ctx.model = chat.model
    ctx.enforced = strict_requested(chat)
    paths = anthropic_paths(decoded)
    estimate = len(body) // 4
    if chat.stream:
        return await stream_messages(
            chat,
            ctx,
            service,
            request.receive,
            paths,
            estimated_tokens=estimate,
            keepalive_s=service.settings.stream_keepalive_s,
        )
    result = await service.complete(chat, ctx, paths, estimated_tokens=estimate)
    retries = ctx.tally.retries if ctx.tally else 0
    payload = encode_response(result, model=chat.model, schema_retries=retries)
    return JsonResponse(orjson.dumps(payload))
