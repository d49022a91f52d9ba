"""The upstream failures an adapter or the transport raises, each with its client-facing code.

Only ``UpstreamConnectError`` (nothing was sent) and ``UpstreamStatusError`` with a retryable
status are retried (``gateway.upstream.retry``); the others end the request with 502/504.
"""

from __future__ import annotations

from gateway.errors import UpstreamError, UpstreamTimeout

__all__ = [
    "OutputTooLarge",
    "UpstreamConnectError",
    "UpstreamError",
    "UpstreamInvalidResponse",
    "UpstreamStatusError",
    "UpstreamTimeout",
]


class UpstreamConnectError(UpstreamError):
    """The upstream could not be reached (nothing was sent): safe to retry."""

    default_code = "upstream_unavailable"


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status (``upstream_status``); 429/502/503 are
    retried, after ``retry_after_s`` when the upstream said so."""

    def __init__(
        self, message: str, *, upstream_status: int, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.upstream_status = upstream_status
        self.retry_after_s = retry_after_s


class UpstreamInvalidResponse(UpstreamError):
    """The answer is not one the gateway can use: bad framing or encoding, invalid UTF-8 or
    JSON, an unexpected shape, or a protocol switch (101) nobody asked for."""

    default_code = "upstream_invalid_response"


class OutputTooLarge(UpstreamError):
    """The answer (decompressed), one stream line or event, or one tool call's arguments
    passed its cap; reading stopped there."""

    default_code = "upstream_output_too_large"
