"""A dialect endpoint's request body: admitted first, then parsed and decoded.

Every body-reading endpoint goes the same way::

    bytes -> (large: admission, the key's rate limit and concurrency, 429 before any parse)
      -> parse (depth bound) -> item count (max_input_items) -> the dialect's decode

The parse, the count and the decode run as one job through ``ChatService.offload``: off
the event loop in a worker thread when the body is ``body_offload_bytes`` or larger,
inline below it. A refusal after the admission (400, 404) is settled by
``ChatService.refused_early``.

Example::

    body = await admitted_body(request, service)
    chat = await decoded_body(service, body, ("messages",), decode_chat_request)
    chat = sized(service, chat, len(body))      # its re-encoding goes off the loop too
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request

from gateway.bounds import items_over
from gateway.canonical import ChatRequest
from gateway.errors import InvalidRequest
from gateway.service import ChatService
from gateway.web import parse_json_body, read_body, request_context

_T = TypeVar("_T")


async def admitted_body(request: Request, service: ChatService, *, tokens: bool = True) -> bytes:
    """The whole body; a large one (``body_offload_bytes`` or more) once the key is
    admitted for it: one request and (``tokens``) its bytes / 4 tokens, charged before
    anything looks inside it (a smaller one costs less to parse than the limiter's round
    trip: it is admitted after decoding, with its ``n``, as ``ChatService.admitted``
    says). The idempotency layer may have admitted it already."""
    ctx = request_context(request.scope)
    body = await read_body(request.receive)
    if ctx.charged is None and service.offload.off_loop(len(body)):
        await service.admit_body(ctx, len(body) // 4 if tokens else 0)
    return body


async def decoded_body(
    service: ChatService, body: bytes, items: tuple[str, ...], decode: Callable[[Any], _T]
) -> _T:
    """``decode`` of the parsed body, after the depth and the item count were checked
    (``items``: the lists that hold the request's items); off the loop when large."""
    settings = service.settings
    return await service.offload.run(
        len(body), _parse_and_decode, body, settings.max_json_depth, settings.max_input_items,
        items, decode,
    )


def sized(service: ChatService, request: ChatRequest, size: int) -> ChatRequest:
    """``request`` marked with the ``size`` of client JSON it came from when that is large,
    so that its upstream adapter encodes it off the loop as well."""
    if not service.offload.off_loop(size):
        return request
    return dataclasses.replace(request, body_bytes=size)


def _parse_and_decode(
    body: bytes, max_depth: int, max_items: int, items: tuple[str, ...],
    decode: Callable[[Any], _T],
) -> _T:
    data = parse_json_body(body, max_depth)
    if isinstance(data, dict):
        over = items_over(data, items, max_items)
        if over is not None:
            raise InvalidRequest(
                f"The request carries more than {max_items} items (messages, input items and "
                "the content blocks in them, counted together; max_input_items).",
                code="too_many_input_items",
                param=over,
            )
    return decode(data)
