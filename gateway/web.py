"""What endpoints share: JSON responses, reading the body, error bodies, the request's context.

Dialect endpoints, routes and the idempotency layer import this module, never the
middleware that wraps them (``gateway.middleware.envelope``).

Example::

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        ctx = request_context(scope)
        payload = orjson.loads(await read_body(receive))
        await JsonResponse(json_bytes({"id": ctx.request_id}))(scope, receive, send)
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope

from gateway.bounds import DEFAULT_MAX_JSON_DEPTH, too_deep
from gateway.context import RequestContext
from gateway.errors import Dialect, GatewayError, InvalidRequest

JSON_HEADER = (b"content-type", b"application/json")


def request_context(scope: Scope) -> RequestContext:
    """The context the outer middleware attached to this request."""
    ctx: RequestContext = scope["state"]["ctx"]
    return ctx


def error_body(exc: GatewayError, request_id: str, dialect: Dialect = "openai") -> bytes:
    """The unified error envelope of ``exc`` in ``dialect``'s vocabulary, as bytes."""
    return orjson.dumps(exc.envelope(request_id, dialect))


def json_bytes(payload: Any) -> bytes:
    return orjson.dumps(payload)


def parse_json_body(
    body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH, param: str | None = None
) -> Any:
    """A client's request body as JSON, or 400 ``invalid_json`` saying why: not JSON, or
    nested deeper than ``max_depth`` (``param``: the path of the first value too deep)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(
            f"The request body is not valid JSON: {exc}.", code="invalid_json", param=param
        ) from exc
    deep = too_deep(body, data, max_depth)
    if deep is not None:
        raise InvalidRequest(
            f"The request body nests JSON deeper than {max_depth} levels (at {deep}).",
            code="invalid_json",
            param=deep,
        )
    return data


async def read_body(receive: Receive) -> bytes:
    """The whole request body, read straight from ``receive`` (``Request.body()`` without
    its per-chunk generator). Raises Starlette's ``ClientDisconnect`` if the client goes
    away first, as ``Request.body()`` does."""
    message = await receive()
    if message["type"] != "http.request":
        raise ClientDisconnect()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class JsonResponse(Response):
    """A 200 ``application/json`` response of bytes already encoded (by orjson)."""

    media_type = "application/json"
