"""The ``x-syntic-strictify`` request header, shared by both dialects' endpoints."""

from __future__ import annotations

import dataclasses

from starlette.requests import Request

from gateway.canonical import ChatRequest
from gateway.errors import InvalidRequest
from gateway.web import has_header

HEADER = "x-syntic-strictify"
_NAME = HEADER.encode()
_VALUES = {"1": True, "true": True, "0": False, "false": False}


def with_strictify_header(request: Request, chat: ChatRequest) -> ChatRequest:
    """``chat`` with ``strictify`` set when the header asks for the strict projection
    (``1``/``true``; ``0``/``false`` or no header leave the model's setting)."""
    if not has_header(request.scope, _NAME):
        return chat
    raw = request.headers.get(HEADER)
    if raw is None:
        return chat
    value = _VALUES.get(raw.strip().lower())
    if value is None:
        raise InvalidRequest(f"The {HEADER} header must be 1 or 0.", param=HEADER)
    return dataclasses.replace(chat, strictify=True) if value else chat
