"""What the request path asks of the rate limiter."""

from __future__ import annotations

from typing import Protocol

from gateway.canonical.record import record
from gateway.keys.base import Principal


@record
class RateDecision:
    allowed: bool
    limit_requests: int | None = None
    remaining_requests: int | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_s: float = 0.0
    retry_after_s: float = 0.0


class RateLimiter(Protocol):
    async def check(self, principal: Principal, tokens: int, requests: int = 1) -> RateDecision:
        """Admit a request costing ``tokens`` (estimated) for this key, or refuse; it counts
        as ``requests`` requests (a chat request with ``n`` choices counts ``n``)."""
        ...

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        """Charge tokens that became known after the request finished."""
        ...
