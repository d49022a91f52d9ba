"""The fixed-window rule shared by the local limiter and the Redis Lua script.

Per key and per 60-second window (anchored at the window's first request, not at clock
minutes): a request is admitted if the request count stays within ``rpm`` and the token
count within ``tpm``. A request may count as several (``requests``: a chat request with
``n`` choices counts ``n``, one per upstream call). A request larger than the whole token
budget is still admitted into an empty window (otherwise it could never be served).
``None`` means unlimited.
"""

from __future__ import annotations

from gateway.ratelimit.base import RateDecision

WINDOW_S = 60


def decide(
    rpm: int | None,
    tpm: int | None,
    used_requests: int,
    used_tokens: int,
    cost: int,
    reset_s: float,
    requests: int = 1,
) -> tuple[RateDecision, bool]:
    """The decision for one request (counting ``requests``) given the window's usage so
    far; the flag says whether to charge it (it was admitted)."""
    ok_r = rpm is None or used_requests + requests <= rpm
    ok_t = tpm is None or used_tokens == 0 or used_tokens + cost <= tpm
    allowed = ok_r and ok_t
    req = used_requests + (requests if allowed else 0)
    tok = used_tokens + (cost if allowed else 0)
    return (
        RateDecision(
            allowed=allowed,
            limit_requests=rpm,
            remaining_requests=None if rpm is None else max(0, rpm - req),
            limit_tokens=tpm,
            remaining_tokens=None if tpm is None else max(0, tpm - tok),
            reset_s=reset_s,
            retry_after_s=0.0 if allowed else reset_s,
        ),
        allowed,
    )


def unlimited() -> RateDecision:
    """The decision for a key without limits."""
    return RateDecision(allowed=True)
