"""``POST /v1/responses``, ``GET /v1/responses/{id}``, ``DELETE /v1/responses/{id}``.

    bytes -> orjson -> decode -> (previous_response_id: stored history) -> ChatService
      -> ResponseShape -> (store: kept for responses_retention_s) -> bytes

The same contract as chat completions, through the same ``ChatService``: strict schemas
linted before any upstream call (``param`` like ``tools[0].parameters.properties.x`` or
``text.format.schema``), strict calls and strict ``text.format`` output validated and
corrected once, else 422 with the JSON pointer in ``param``; ``x-syntic-schema-retries``
and ``usage.schema_retries``; the ledger row, idempotency keys and rate limits are the
middleware's and the service's, as for the other dialects.
"""

from __future__ import annotations

import time

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.dialects.body import admitted_body, decoded_body, sized
from gateway.dialects.on_invalid_header import with_on_invalid_header
from gateway.dialects.responses.decode import decode_request
from gateway.dialects.responses.encode import ResponseShape, response_id
from gateway.dialects.responses.stored import check_quota, history, keep, key_id, not_found
from gateway.dialects.responses.stream_endpoint import stream_response
from gateway.dialects.strictify_header import with_strictify_header
from gateway.dialects.vendor_headers import vendor_headers
from gateway.enforcement import ParamPaths, strict_requested
from gateway.errors import GatewayError, InvalidRequest
from gateway.service import ChatService
from gateway.stored import ResponseStore
from gateway.web import JsonResponse, request_context

__all__ = ["RESPONSES_PATHS", "create_response", "response_by_id"]

_ITEMS = ("input",)  # where max_input_items counts

RESPONSES_PATHS = ParamPaths(
    tool_schema="tools[{i}].parameters",
    tool_name="tools[{i}].name",
    response_schema="text.format.schema",
    tools="tools",
    dialect="openai",
)


def _store(request: Request) -> ResponseStore:
    store: ResponseStore = request.app.services.responses
    return store


async def create_response(request: Request) -> Response:
    ctx = request_context(request.scope)
    service: ChatService = request.app.service
    settings = service.settings
    store = _store(request)
    body, size = await admitted_body(request, service)
    headers = vendor_headers(request.scope["headers"])
    try:
        decoded = await decoded_body(
            service,
            body,
            size,
            _ITEMS,
            lambda data, members: decode_request(data, headers, members),
        )
        ctx.model = decoded.model
        if decoded.store:
            await check_quota(store, ctx, settings.responses_max_bytes_per_key)
        past, past_bytes = await history(
            store, decoded, ctx, settings.responses_max_history_bytes, service.offload
        )
        # The conversation in canonical form: as costly as decoding it, so sized alike.
        cost = size + past_bytes
        whole = await service.offload.run(cost, decoded.chat, past)
        strict = with_on_invalid_header(request, with_strictify_header(request, whole))
        chat = sized(service, strict, cost)
    except GatewayError:
        await service.refused_early(ctx)
        raise
    ctx.enforced = strict_requested(chat)
    estimate = (len(body) + past_bytes) // 4
    shape = ResponseShape(
        decoded, response_id=response_id(ctx.request_id), created_at=int(time.time())
    )
    if chat.stream:
        return await stream_response(
            chat,
            shape,
            ctx,
            service,
            request.receive,
            RESPONSES_PATHS,
            store=store if decoded.store else None,
            decoded=decoded,
            estimated_tokens=estimate,
        )
    result = await service.complete(chat, ctx, RESPONSES_PATHS, estimated_tokens=estimate)
    retries = ctx.tally.retries if ctx.tally else 0
    payload = shape.complete(result, schema_retries=retries, completed_at=int(time.time()))
    if decoded.store:
        await keep(
            store,
            ctx,
            settings.responses_retention_s,
            decoded,
            payload,
            service.offload,
            chat.body_bytes,
        )
    return JsonResponse(orjson.dumps(payload))


async def response_by_id(request: Request) -> Response:
    """``GET``: the stored response; ``DELETE``: forget it. Only for the key that made it."""
    ctx = request_context(request.scope)
    rid = request.path_params["response_id"]
    store = _store(request)
    if request.method == "DELETE":
        if not await store.delete(rid, key_id(ctx)):
            raise not_found(rid)
        return JsonResponse(orjson.dumps({"id": rid, "object": "response", "deleted": True}))
    if request.query_params.get("stream") not in (None, "false"):
        raise InvalidRequest(
            "Streaming a stored response again is not supported by this gateway.",
            code="unsupported_parameter",
            param="stream",
        )
    found = await store.get(rid, key_id(ctx))
    if found is None:
        raise not_found(rid)
    return JsonResponse(orjson.dumps(found.response))
