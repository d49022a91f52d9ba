"""The ``x-syntic-on-invalid`` request header, shared by the three dialects' endpoints."""

from __future__ import annotations

import dataclasses
from typing import get_args

from starlette.requests import Request

from gateway.canonical import ChatRequest, OnInvalid
from gateway.errors import InvalidRequest
from gateway.web import has_header

HEADER = "x-syntic-on-invalid"
_NAME = HEADER.encode()
_VALUES: tuple[OnInvalid, ...] = get_args(OnInvalid)


def with_on_invalid_header(request: Request, chat: ChatRequest) -> ChatRequest:
    """``chat`` with ``on_invalid`` as the header says (``error`` or ``tool_error``,
    overriding the model's ``on_invalid``); no header leaves the model's setting."""
    if not has_header(request.scope, _NAME):
        return chat
    raw = request.headers.get(HEADER)
    if raw is None:
        return chat
    value = raw.strip().lower()
    for known in _VALUES:
        if value == known:
            return dataclasses.replace(chat, on_invalid=known)
    raise InvalidRequest(
        f"The {HEADER} header must be one of {', '.join(_VALUES)}; got {raw[:64]!r}.",
        param=HEADER,
    )
