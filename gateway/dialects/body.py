"""A dialect endpoint's request body: admitted first, then parsed and decoded.

Every body-reading endpoint goes the same way::

    bytes -> (large: admission, the key's rate limit and concurrency, 429 before any parse)
      -> parse (depth bound) -> item count (max_input_items) -> the dialect's decode

The parse, the count and the decode run as one job through ``ChatService.offload``: off
the event loop when the body is ``body_offload_bytes`` or larger (its bounds checked in a
child process first, so a body past them is never parsed in the gateway's own; then the
parse and decode in a worker thread), inline below it. A refusal after the admission
(400, 404) is settled by ``ChatService.refused_early``.

Example::

    body, size = await admitted_body(request, service)  # size: the body's Offload.cost
    chat = await decoded_body(service, body, size, ("messages",), decode_chat_request)
    chat = sized(service, chat, size)  # re-encoded off the loop too
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from starlette.requests import Request

from gateway.bounds import NO_MEMBERS, Members, items_over, too_many_items_message
from gateway.canonical import ChatRequest
from gateway.errors import GatewayError, InvalidRequest
from gateway.service import ChatService
from gateway.web import content_length, parse_json_members, read_body, request_context

_T = TypeVar("_T")


async def admitted_body(
    request: Request, service: ChatService, *, tokens: bool = True
) -> tuple[bytes, int]:
    """The whole body and its ``Offload.cost`` (a pass over the bytes: taken once, for the
    admission, the decode and the encode alike); a large body (``body_offload_bytes`` or
    more) once the key is admitted for it: one request and (``tokens``) its bytes / 4
    tokens, charged before anything looks inside it, before it is even read when its
    ``Content-Length`` says so. A smaller one costs less to parse than the limiter's
    round trip: it is admitted after decoding, with its ``n``, as ``ChatService.admitted``
    says. The idempotency layer may have admitted it already."""
    ctx = request_context(request.scope)
    declared = content_length(request.scope)
    if ctx.charged is None and declared is not None and service.offload.off_loop(declared):
        # Before reading it: a key over its limit costs not even the upload.
        await service.admit_body(ctx, declared // 4 if tokens else 0)
    body = await read_body(request.receive)
    size = service.offload.cost(body)
    if ctx.charged is None and service.offload.off_loop(size):
        await service.admit_body(ctx, len(body) // 4 if tokens else 0)
    return body, size


async def decoded_body(
    service: ChatService,
    body: bytes,
    size: int,
    items: tuple[str, ...],
    decode: Callable[[Any, Members], _T],
) -> _T:
    """``decode(data, members)`` of the parsed body, after the depth and the item count
    were checked (``size``: the body's ``Offload.cost``; ``items``: the lists that hold
    the request's items; ``members``: what the depth check encoded, for the upstream body
    to reuse, ``gateway.bounds.checked_depth``); off the loop when large."""
    settings = service.settings
    offload = service.offload
    if not offload.off_loop(size):
        # Inline, as ``offload.run`` would run it, without its coroutine: every small body.
        return _parse_and_decode(
            body, settings.max_json_depth, settings.max_input_items, items, decode
        )
    # Bounds first, in another process: a body past them is never parsed here.
    verdict = await offload.inspect(
        body, size, settings.max_json_depth, settings.max_input_items, items
    )
    if verdict.code is not None:
        raise InvalidRequest(verdict.message, code=verdict.code, param=verdict.param)
    return await offload.run(
        size,
        _parse_and_decode,
        body,
        settings.max_json_depth,
        settings.max_input_items,
        items,
        decode,
        verdict.checked,
    )


def sized(service: ChatService, request: ChatRequest, size: int) -> ChatRequest:
    """``request`` marked with the ``size`` of client JSON it came from (its
    ``Offload.cost``) when that is large, so that its upstream adapter encodes it off the
    loop as well."""
    if not service.offload.off_loop(size):
        return request
    return dataclasses.replace(request, body_bytes=size)


def _parse_and_decode(
    body: bytes,
    max_depth: int,
    max_items: int,
    items: tuple[str, ...],
    decode: Callable[[Any, Members], _T],
    checked: bool = False,
) -> _T:
    if checked:
        # The inspection parsed these same bytes within the bounds: not walked again.
        data = orjson.loads(body)
        members: Members = NO_MEMBERS
    else:
        # Each item counted takes two bytes of the body at least (its first, then a comma
        # or a closing bracket): a body of at most twice the limit cannot carry too many.
        check = _item_count(items, max_items) if len(body) > 2 * max_items else None
        data, members = parse_json_members(body, max_depth, check=check)
    try:
        return decode(data, members)
    except GatewayError as exc:
        # The parse is freed here, in the worker, not by whoever handles the error.
        traceback.clear_frames(exc.__traceback__)
        del data
        raise


def _item_count(items: tuple[str, ...], max_items: int) -> Callable[[Any], None]:
    """A parsed body's check: 400 ``too_many_input_items`` past ``max_items``."""

    def count(data: Any) -> None:
        over = items_over(data, items, max_items) if isinstance(data, dict) else None
        if over is not None:
            raise InvalidRequest(
                too_many_items_message(max_items), code="too_many_input_items", param=over
            )

    return count
