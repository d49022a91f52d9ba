"""``POST /v1/messages/count_tokens``: the anthropic SDK's ``messages.count_tokens``.

The body is a Messages request without ``max_tokens`` (decoded with the same rules, so a
bad request is the same 400); the answer is ``{"input_tokens": N}``. Who counts depends on
the model's upstream (``ChatService.count_tokens``), and ``x-syntic-token-count`` says
which: ``upstream`` (an Anthropic upstream's own endpoint), ``tokenizer`` (the local
model's), ``estimate`` (an OpenAI model's encoding, or bytes / 4). Rate limited as one
request with no tokens; no model runs, so nothing is billed.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.canonical.origin import Header
from gateway.dialects.anthropic.decode import DecodedRequest, decode_request
from gateway.dialects.anthropic.endpoint import ITEMS
from gateway.dialects.body import admitted_body, decoded_body, sized
from gateway.dialects.vendor_headers import vendor_headers
from gateway.errors import GatewayError, InvalidRequest
from gateway.service import ChatService
from gateway.web import JsonResponse, request_context

__all__ = ["count_tokens"]

HEADER = b"x-syntic-token-count"


async def count_tokens(request: Request) -> Response:
    ctx = request_context(request.scope)
    service: ChatService = request.app.service
    body, size = await admitted_body(request, service, tokens=False)  # no model runs: no tokens
    headers = vendor_headers(request.scope["headers"])
    try:
        data, decoded = await decoded_body(
            service, body, size, ITEMS, lambda d, _members: _decode(d, headers)
        )
    except GatewayError:
        await service.refused_early(ctx)
        raise
    chat = sized(service, decoded.request, size)
    ctx.model = chat.model
    counted = await service.count_tokens(chat, data, ctx, body_bytes=len(body))
    ctx.add_raw_headers([(HEADER, counted.source.encode())])
    return JsonResponse(orjson.dumps({"input_tokens": counted.input_tokens}))


def _decode(data: Any, headers: tuple[Header, ...]) -> tuple[dict[str, Any], DecodedRequest]:
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if "max_tokens" in data or "stream" in data:
        name = "max_tokens" if "max_tokens" in data else "stream"
        raise InvalidRequest(f"{name}: Extra inputs are not permitted.", param=name)
    # The Messages decoder checks everything else; max_tokens is what it requires.
    return data, decode_request({**data, "max_tokens": 1}, headers)
