"""The gateway's one error tree.

Every layer raises ``GatewayError`` (or a subclass); one handler turns it into the unified
envelope, which each dialect renders::

    {"error": {"type": ..., "code": ..., "message": ..., "param": ...}, "request_id": "req_..."}

    GatewayError(status, type, code, message, param)
      ├── InvalidRequest        400 invalid_request   (bad JSON, bad shape, schema issues)
      ├── AuthenticationError   401 authentication_error
      ├── PermissionDenied      403 permission_error
      ├── NotFound              404 not_found
      ├── Conflict              409 conflict_error    (idempotency_in_progress)
      ├── PayloadTooLarge       413 invalid_request
      ├── UnprocessableOutput   422 invalid_request   (tool_arguments_invalid, json_output_invalid)
      ├── RateLimited           429 rate_limit_error  (carries retry_after and headers)
      ├── Overloaded            503 overloaded_error
      ├── UpstreamError         502 upstream_error
      └── UpstreamTimeout       504 upstream_timeout
"""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    status: int = 500
    type: str = "api_error"
    default_code: str = "internal_error"

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

    def envelope(self, request_id: str) -> dict[str, Any]:
        return {
            "error": {
                "type": self.type,
                "code": self.code,
                "message": self.message,
                "param": self.param,
            },
            "request_id": request_id,
        }


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request"
    default_code = "invalid_request"


class AuthenticationError(GatewayError):
    status = 401
    type = "authentication_error"
    default_code = "invalid_api_key"


class PermissionDenied(GatewayError):
    status = 403
    type = "permission_error"
    default_code = "permission_denied"


class NotFound(GatewayError):
    status = 404
    type = "not_found"
    default_code = "not_found"


class Conflict(GatewayError):
    status = 409
    type = "conflict_error"
    default_code = "idempotency_in_progress"  # the one conflict the gateway reports


class PayloadTooLarge(GatewayError):
    status = 413
    type = "invalid_request"
    default_code = "request_too_large"


class UnprocessableOutput(GatewayError):
    status = 422
    type = "invalid_request"
    default_code = "tool_arguments_invalid"


class RateLimited(GatewayError):
    status = 429
    type = "rate_limit_error"
    default_code = "rate_limit_exceeded"


class Overloaded(GatewayError):
    status = 503
    type = "overloaded_error"
    default_code = "overloaded"


class UpstreamError(GatewayError):
    status = 502
    type = "upstream_error"
    default_code = "upstream_error"


class UpstreamTimeout(GatewayError):
    status = 504
    type = "upstream_timeout"
    default_code = "upstream_timeout"
