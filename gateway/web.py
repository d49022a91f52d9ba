"""What endpoints share: JSON responses, reading the body, error bodies, the request's context
and the rate-limit headers it gives a response.

Dialect endpoints, routes and the idempotency layer import this module, never the
middleware that wraps them (``gateway.middleware.envelope``).

Example::

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        ctx = request_context(scope)
        payload = orjson.loads(await read_body(receive))
        await JsonResponse(json_bytes({"id": ctx.request_id}))(scope, receive, send)
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from operator import indexOf, itemgetter
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope

from gateway.bounds import (
    DEFAULT_MAX_JSON_DEPTH,
    Members,
    checked_depth,
    not_json_message,
    too_deep_message,
)
from gateway.context import RequestContext
from gateway.errors import Dialect, GatewayError, InvalidRequest
from gateway.ratelimit.base import RateDecision

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
    body: bytes,
    max_depth: int = DEFAULT_MAX_JSON_DEPTH,
    param: str | None = None,
    check: Callable[[Any], None] | None = None,
) -> Any:
    """A client's request body as JSON, or 400 ``invalid_json`` saying why: not JSON, or
    nested deeper than ``max_depth`` (``param``: the path of the first value too deep).
    ``check(data)`` runs first (a cheaper bound that may refuse the body before the depth
    pass)."""
    return parse_json_members(body, max_depth, param, check)[0]


def parse_json_members(
    body: bytes,
    max_depth: int = DEFAULT_MAX_JSON_DEPTH,
    param: str | None = None,
    check: Callable[[Any], None] | None = None,
) -> tuple[Any, Members]:
    """``parse_json_body``, and the top-level members its depth check encoded
    (``gateway.bounds.checked_depth``), for an upstream body to reuse."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(not_json_message(exc), code="invalid_json", param=param) from exc
    try:
        if check is not None:
            check(data)
        deep, members = checked_depth(body, data, max_depth)
    except GatewayError as exc:
        # Freed here: the traceback would carry it to whichever thread handles the error
        # (a large body is parsed in a worker, and freeing it costs time too).
        traceback.clear_frames(exc.__traceback__)
        del data
        raise
    if deep is not None:
        del data
        raise InvalidRequest(too_deep_message(max_depth, deep), code="invalid_json", param=deep)
    return data, members


_NAME = itemgetter(0)  # a raw header's name


def content_length(scope: Scope) -> int | None:
    """The request's declared ``Content-Length`` (None: absent, malformed, or chunked)."""
    headers = scope.get("headers", ())
    try:  # the first one, found in a C pass over the names
        at = indexOf(map(_NAME, headers), b"content-length")
    except ValueError:
        return None
    try:
        return int(headers[at][1])
    except ValueError:
        return None


def has_header(scope: Scope, name: bytes) -> bool:
    """Whether the request carries a header ``name`` (lower-case, as ASGI gives names):
    one C pass over the raw names, where ``Request.headers.get`` loops in Python. For a
    header most requests lack, looked for before reading it."""
    return name in map(_NAME, scope["headers"])


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


def rate_limit_headers(decision: RateDecision) -> list[tuple[bytes, bytes]]:
    """The ``x-ratelimit-*`` headers of the rate limiter's decision (``RequestContext.rate``),
    encoded as a response carries them; none for a key without limits."""
    out: list[tuple[bytes, bytes]] = []
    if decision.limit_requests is not None:
        out.append((b"x-ratelimit-limit-requests", b"%d" % decision.limit_requests))
    if decision.remaining_requests is not None:
        out.append((b"x-ratelimit-remaining-requests", b"%d" % decision.remaining_requests))
    if decision.limit_tokens is not None:
        out.append((b"x-ratelimit-limit-tokens", b"%d" % decision.limit_tokens))
    if decision.remaining_tokens is not None:
        out.append((b"x-ratelimit-remaining-tokens", b"%d" % decision.remaining_tokens))
    if decision.limit_requests is not None or decision.limit_tokens is not None:
        out.append((b"x-ratelimit-reset", f"{decision.reset_s:g}s".encode()))
    return out
