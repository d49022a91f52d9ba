"""``POST /v1/messages/count_tokens``: the anthropic SDK's ``messages.count_tokens``.

The body is a Messages request without ``max_tokens`` (decoded with the same rules, so a
bad request is the same 400); the answer is ``{"input_tokens": N}``. Who counts depends on
the model's upstream (``ChatService.count_tokens``), and ``x-syntic-token-count`` says
which: ``upstream`` (an Anthropic upstream's own endpoint), ``tokenizer`` (the local
model's), ``estimate`` (an OpenAI model's encoding, or bytes / 4). Rate limited as one
request with no tokens; no model runs, so nothing is billed.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.dialects.anthropic.decode import decode_request
from gateway.dialects.vendor_headers import vendor_headers
from gateway.errors import InvalidRequest
from gateway.service import ChatService
from gateway.web import JsonResponse, parse_json_body, read_body, request_context

__all__ = ["count_tokens"]

HEADER = b"x-syntic-token-count"


async def count_tokens(request: Request) -> Response:
    ctx = request_context(request.scope)
    body = await read_body(request.receive)
    data = parse_json_body(body)
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if "max_tokens" in data or "stream" in data:
        name = "max_tokens" if "max_tokens" in data else "stream"
        raise InvalidRequest(f"{name}: Extra inputs are not permitted.", param=name)
    # The Messages decoder checks everything else; max_tokens is what it requires.
    decoded = decode_request({**data, "max_tokens": 1}, vendor_headers(request.scope["headers"]))
    chat = decoded.request
    ctx.model = chat.model
    service: ChatService = request.app.state.service
    counted = await service.count_tokens(chat, data, ctx, body_bytes=len(body))
    ctx.add_raw_headers([(HEADER, counted.source.encode())])
    return JsonResponse(orjson.dumps({"input_tokens": counted.input_tokens}))
