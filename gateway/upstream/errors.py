"""The upstream failures an adapter or the transport raises, each with its client-facing code.

Only ``UpstreamConnectError`` (nothing was sent) and ``UpstreamStatusError`` with a retryable
status are retried (``gateway.upstream.retry``); the others end the request.

An upstream's error status keeps its meaning (``status_error``): a 4xx is the client's
request refused by the vendor, so it reaches the client with the same status, code
``upstream_rejected``, the vendor's message and ``param`` (scrubbed of credentials and
capped: the body is hostile input), never as a 502 the SDKs would retry. Two exceptions:
401/403 (and a proxy's 407) refuse the *operator's* upstream key, which the client can
neither see nor fix, so they become 502 ``upstream_credentials_rejected`` with
``x-should-retry: false``; a 5xx is the upstream failing, 502 ``upstream_error``.

Whatever the status, the vendor's own word for the failure reaches the client beside the
gateway's ``code``: ``error.upstream_code`` (OpenAI's ``error.code``, such as
``context_length_exceeded``; Anthropic's errors have none, so its ``error.type``, such as
``overloaded_error``) and ``error.upstream_status``; the upstream's ``retry-after`` (on a
429, 503 or 529) and ``x-should-retry`` go out as its headers.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from gateway.errors import Dialect, UpstreamError, UpstreamTimeout
from gateway.upstream.redact import scrub

__all__ = [
    "OutputTooLarge",
    "UpstreamConnectError",
    "UpstreamError",
    "UpstreamInvalidResponse",
    "UpstreamReportedError",
    "UpstreamStatusError",
    "UpstreamTimeout",
    "client_indexes",
    "reported_code",
    "should_retry_header",
    "status_error",
]

MAX_MESSAGE_CHARS = 1000  # of the vendor's message quoted to the client
MAX_PARAM_CHARS = 200
_PARSED_BYTES = 64 * 1024  # a longer error body is not parsed, only quoted (capped)
_CREDENTIAL_STATUSES = frozenset({401, 403, 407})
_TYPE_RE = re.compile(r"[a-z][a-z_]{0,63}")  # a vendor's type worth keeping verbatim
# A message index in a vendor's error: ``messages[2]``, ``messages.2``, or pydantic's
# location tuple ``'messages', 2``.
_INDEX_RE = re.compile(r"""(messages(?:\[|\.|['"]?\s*,\s*))(\d+)""")
_CODE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a vendor's code, likewise
# Statuses whose ``retry-after`` tells the client when to come back (a rate limit, an
# overloaded upstream).
_WAIT_STATUSES = frozenset({429, 503, 529})


class UpstreamConnectError(UpstreamError):
    """The upstream could not be reached (nothing was sent): safe to retry."""

    default_code = "upstream_unavailable"


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status (``upstream_status``); 429/502/503/529 are
    retried, after ``retry_after_s`` when the upstream said so. ``status`` is what the
    client gets (see the module docstring); ``upstream_type`` the vendor's ``error.type``,
    kept when the client speaks the same vendor's dialect (``wire``)."""

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int,
        retry_after_s: float | None = None,
        status: int = 502,
        code: str | None = None,
        param: str | None = None,
        upstream_type: str | None = None,
        upstream_code: str | None = None,
        wire: Dialect = "openai",
        headers: dict[str, str] | None = None,
        should_retry: bool | None = None,
    ) -> None:
        super().__init__(message, code=code, param=param, headers=headers)
        self.status = status
        self.upstream_status = upstream_status
        self.retry_after_s = retry_after_s
        self.upstream_type = upstream_type
        self.upstream_code = upstream_code
        self.wire = wire
        if upstream_status in _CREDENTIAL_STATUSES:
            self.retryable = False  # the operator's key: the same request fails again
        elif should_retry is not None:
            self.retryable = should_retry  # the vendor's own x-should-retry

    def envelope(self, request_id: str, dialect: Dialect = "openai") -> dict[str, Any]:
        body = super().envelope(request_id, dialect)
        error = body["error"]
        if self.upstream_code is not None:
            error["upstream_code"] = self.upstream_code
        error["upstream_status"] = self.upstream_status
        return body

    def error_type(self, dialect: Dialect = "openai") -> str:
        kept = self.upstream_type
        if kept is not None and dialect == self.wire and self.status == self.upstream_status:
            return kept
        return super().error_type(dialect)


class UpstreamReportedError(UpstreamError):
    """The upstream reported a failure inside its answer (a stream's ``error`` event or
    chunk, a ``failed`` response): 502 ``upstream_error``, with the vendor's own code
    (``error.upstream_code``) when it gave one."""

    def __init__(self, message: str, *, upstream_code: str | None = None) -> None:
        super().__init__(message)
        self.upstream_code = upstream_code

    def envelope(self, request_id: str, dialect: Dialect = "openai") -> dict[str, Any]:
        body = super().envelope(request_id, dialect)
        if self.upstream_code is not None:
            body["error"]["upstream_code"] = self.upstream_code
        return body


def reported_code(error: Any) -> str | None:
    """``error.upstream_code`` from an error object inside an answer: its ``code`` (OpenAI)
    or its ``type`` (Anthropic), when of a sane shape."""
    if not isinstance(error, dict):
        return None
    kind = error.get("type")
    return _vendor_code(
        error.get("code"), kind if isinstance(kind, str) and _TYPE_RE.fullmatch(kind) else None
    )


class UpstreamInvalidResponse(UpstreamError):
    """The answer is not one the gateway can use: bad framing or encoding, invalid UTF-8 or
    JSON, an unexpected shape, or a protocol switch (101) nobody asked for."""

    default_code = "upstream_invalid_response"


class OutputTooLarge(UpstreamError):
    """The answer (decompressed), one stream line or event, or one tool call's arguments
    passed its cap; reading stopped there."""

    default_code = "upstream_output_too_large"


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _vendor_error(body: bytes) -> tuple[str, Any, Any, Any]:
    """(message, type, param, code) from an OpenAI (``{"error": {...}}``) or Anthropic
    (``{"type": "error", "error": {...}}``) error body; the raw text when it is neither."""
    text = body[:_PARSED_BYTES].decode("utf-8", "replace")
    if len(body) <= _PARSED_BYTES:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return (error["message"], error.get("type"), error.get("param"), error.get("code"))
            if isinstance(error, str):
                return error, None, None, None
    return text.strip() or "(empty body)", None, None, None


def _vendor_code(code: Any, kind: str | None) -> str | None:
    """``error.upstream_code``: the vendor's ``code`` when it sends one of a sane shape,
    else its type (Anthropic's errors are told apart by type alone)."""
    if isinstance(code, str) and _CODE_RE.fullmatch(code):
        return code
    return kind


def should_retry_header(value: str | None) -> bool | None:
    """The upstream's ``x-should-retry`` as a verdict; None when absent or unreadable."""
    if value is None:
        return None
    return {"true": True, "false": False}.get(value.strip().lower())


def client_indexes(text: str, client_messages: int) -> str:
    """``text`` with every message index past the client's own (a turn the gateway added,
    or a body re-encoded for another wire) named as the gateway's: the client never sent
    such a message and could not find it."""

    def name(match: re.Match[str]) -> str:
        if int(match[2]) < client_messages:
            return match[0]
        return f"{match[1]}(a message the gateway added)"

    return _INDEX_RE.sub(name, text)


def status_error(
    status: int,
    body: bytes,
    *,
    secret: str | None,
    wire: Dialect,
    retry_after_s: float | None = None,
    client_messages: int | None = None,
    should_retry: bool | None = None,
) -> UpstreamStatusError:
    """The ``UpstreamStatusError`` for an upstream's error answer (module docstring);
    ``client_messages``: how many of the body's messages are the client's, at its indexes
    (``client_indexes``; None: all of them); ``should_retry``: the upstream's
    ``x-should-retry``."""
    message, vendor_type, vendor_param, vendor_code = _vendor_error(body)
    if client_messages is not None:
        message = client_indexes(message, client_messages)
        if isinstance(vendor_param, str):
            vendor_param = client_indexes(vendor_param, client_messages)
    message = _cap(scrub(message, secret), MAX_MESSAGE_CHARS)
    kept = vendor_type if isinstance(vendor_type, str) and _TYPE_RE.fullmatch(vendor_type) else None
    upstream_code = _vendor_code(vendor_code, kept)
    extra: dict[str, str] = {}
    if status in _WAIT_STATUSES and retry_after_s is not None:
        extra["retry-after"] = str(math.ceil(retry_after_s))  # parsed, not echoed
    if 400 <= status < 500 and status not in _CREDENTIAL_STATUSES:
        param = (
            _cap(scrub(vendor_param, secret), MAX_PARAM_CHARS)
            if isinstance(vendor_param, str) and vendor_param
            else None
        )
        return UpstreamStatusError(
            message,
            upstream_status=status,
            retry_after_s=retry_after_s,
            status=status,
            code="upstream_rejected",
            param=param,
            upstream_type=kept,
            upstream_code=upstream_code,
            wire=wire,
            headers=extra,
            should_retry=should_retry,
        )
    if status in _CREDENTIAL_STATUSES:
        return UpstreamStatusError(
            f"The upstream refused the gateway's credentials for this model (HTTP {status}): "
            f"{message}",
            upstream_status=status,
            code="upstream_credentials_rejected",
            wire=wire,
        )
    return UpstreamStatusError(
        f"Upstream returned HTTP {status}: {message}",
        upstream_status=status,
        retry_after_s=retry_after_s,
        wire=wire,
        upstream_code=upstream_code,
        headers=extra,
        should_retry=should_retry,
    )
