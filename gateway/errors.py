"""The gateway's one error tree, rendered in each dialect's vocabulary.

Every layer raises ``GatewayError`` (or a subclass); one handler turns it into the unified
envelope. The tree fixes the status and the gateway's own ``code``; the dialect that
renders it picks the ``type`` as its vendor spells it (``error_type``), and an Anthropic
error carries the top-level ``"type": "error"`` Anthropic's ``ErrorResponse`` has::

    {"error": {"type": ..., "code": ..., "message": ..., "param": ...}, "request_id": "req_..."}
    {"type": "error", "error": {...}, "request_id": "req_..."}          # /v1/messages*

    GatewayError(status, code, message, param)      type: OpenAI's | Anthropic's
      ├── InvalidRequest       400 invalid_request      invalid_request_error | same
      │     └── SchemaRejected (enforcement/check.py: a strict schema the lint refuses)
      ├── AuthenticationError  401 invalid_api_key      invalid_request_error | authentication_error
      ├── PermissionDenied     403 permission_denied    invalid_request_error | permission_error
      ├── NotFound             404 not_found            invalid_request_error | not_found_error
      ├── RequestTimeout       408 request_timeout      invalid_request_error | same
      ├── Conflict             409 idempotency_in_progress  invalid_request_error | conflict_error
      │     └── IdempotencyInProgress (middleware/idempotency.py)
      ├── PayloadTooLarge      413 request_too_large    invalid_request_error | request_too_large
      ├── UnprocessableOutput  422 tool_arguments_invalid   invalid_request_error | same
      │     ├── OutputRejected (enforcement/correct.py: still invalid after the correction)
      │     └── IdempotencyKeyReused (middleware/idempotency.py)
      ├── RateLimited          429 rate_limit_exceeded  requests | rate_limit_error
      ├── Overloaded           503 overloaded           server_error | overloaded_error
      ├── UpstreamError        502 upstream_error       server_error | api_error
      │     └── UpstreamConnectError, UpstreamStatusError, UpstreamInvalidResponse,
      │         OutputTooLarge (upstream/errors.py; an upstream 4xx keeps its status,
      │         code upstream_rejected)
      └── UpstreamTimeout      504 upstream_timeout     server_error | timeout_error

OpenAI's API answers every 4xx but 429 with ``invalid_request_error`` (a bad key, an
unknown model and a too-long prompt alike), a rate limit with the limit's dimension
(``requests``) and a server failure with ``server_error``; Anthropic has one type per
status (its errors page and the SDK's ``ErrorType``). Every error a retry cannot fix
says so in ``x-should-retry: false``, which both official SDKs obey before their own
status rules (``retry_header``).
"""

from __future__ import annotations

from typing import Any, Literal

Dialect = Literal["openai", "anthropic"]

_OPENAI_TYPES = {429: "requests"}
_ANTHROPIC_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# Statuses a retry of the same request can fix: a slow body, a request still in progress
# (the only conflict the gateway reports) and a rate limit.
_RETRYABLE_4XX = frozenset({408, 409, 429})


def dialect_of(path: str) -> Dialect:
    """The vocabulary a path's errors are rendered in: Anthropic's for ``/v1/messages``
    and what is under it, OpenAI's everywhere else (chat, Responses, models, admin)."""
    if path.startswith("/v1/messages") and (len(path) == 12 or path[12] == "/"):
        return "anthropic"
    return "openai"


def error_type(status: int, dialect: Dialect) -> str:
    """``error.type`` for ``status`` as the dialect's vendor spells it."""
    if dialect == "anthropic":
        if status in _ANTHROPIC_TYPES:
            return _ANTHROPIC_TYPES[status]
        return "invalid_request_error" if status < 500 else "api_error"
    if status in _OPENAI_TYPES:
        return _OPENAI_TYPES[status]
    return "invalid_request_error" if status < 500 else "server_error"


def retry_header(status: int, retryable: bool | None = None) -> str | None:
    """``x-should-retry``'s value: ``"false"`` for what a retry cannot fix (every 4xx but
    408/409/429, and ``retryable`` False); ``"true"`` when ``retryable`` says so; else
    None, leaving the client's own rules (the SDKs retry 408/409/429/5xx)."""
    if retryable is not None:
        return "true" if retryable else "false"
    if 400 <= status < 500 and status not in _RETRYABLE_4XX:
        return "false"
    return None


class GatewayError(Exception):
    status: int = 500
    default_code: str = "internal_error"
    retryable: bool | None = None  # None: as the status says (``retry_header``)

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.param = param
        self.headers: dict[str, str] = dict(headers or {})

    def error_type(self, dialect: Dialect = "openai") -> str:
        return error_type(self.status, dialect)

    @property
    def type(self) -> str:
        """The OpenAI dialects' ``error.type`` (``error_type`` for another dialect)."""
        return self.error_type("openai")

    def response_headers(self) -> dict[str, str]:
        """What the error response carries besides the body: its own headers and
        ``x-should-retry`` where the answer is known."""
        should_retry = retry_header(self.status, self.retryable)
        if should_retry is None:
            return self.headers
        return {**self.headers, "x-should-retry": should_retry}

    def envelope(self, request_id: str, dialect: Dialect = "openai") -> dict[str, Any]:
        error = {
            "type": self.error_type(dialect),
            "code": self.code,
            "message": self.message,
            "param": self.param,
        }
        if dialect == "anthropic":
            return {"type": "error", "error": error, "request_id": request_id}
        return {"error": error, "request_id": request_id}


class InvalidRequest(GatewayError):
    status = 400
    default_code = "invalid_request"


class AuthenticationError(GatewayError):
    status = 401
    default_code = "invalid_api_key"


class PermissionDenied(GatewayError):
    status = 403
    default_code = "permission_denied"


class NotFound(GatewayError):
    status = 404
    default_code = "not_found"


class Conflict(GatewayError):
    status = 409
    default_code = "idempotency_in_progress"  # the one conflict the gateway reports


class PayloadTooLarge(GatewayError):
    status = 413
    default_code = "request_too_large"


class UnprocessableOutput(GatewayError):
    status = 422
    default_code = "tool_arguments_invalid"


class RateLimited(GatewayError):
    status = 429
    default_code = "rate_limit_exceeded"


class Overloaded(GatewayError):
    status = 503
    default_code = "overloaded"


class UpstreamError(GatewayError):
    status = 502
    default_code = "upstream_error"


class RequestTimeout(GatewayError):
    """408: the client did not send its request body in time; the connection is closed."""

    status = 408
    type = "invalid_request"
    default_code = "request_timeout"


class UpstreamTimeout(GatewayError):
    status = 504
    default_code = "upstream_timeout"
