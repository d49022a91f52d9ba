"""Per-process limits: used when no Redis is configured, and as the fallback when it's down.

With N replicas each enforces the key's limits on its own, so the fleet admits up to N
times the limit; configure ``SYNTIC_REDIS_URL`` to share them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.keys.base import Principal
from gateway.ratelimit.base import RateDecision
from gateway.ratelimit.window import WINDOW_S, decide, unlimited


class LocalRateLimiter:
    """Fixed windows (one minute by default) in a dict; implements ``RateLimiter``."""

    def __init__(
        self,
        *,
        window_s: int = WINDOW_S,
        clock: Callable[[], float] = time.time,
        max_keys: int = 100_000,
    ) -> None:
        self.window_s = window_s
        self.fallback_count = 0  # always 0 here; the Redis limiter counts its fallbacks
        self._clock = clock
        self._max_keys = max_keys
        # key_id -> [window start, requests, tokens]
        self._windows: dict[str, list[float]] = {}

    def _slot(self, key_id: str) -> tuple[list[float], float]:
        # Windows are anchored at a key's first request (not at clock minutes), so a burst
        # is never split across an arbitrary boundary: the same rule as the Redis script.
        now = self._clock()
        slot = self._windows.get(key_id)
        if slot is None or now - slot[0] >= self.window_s:
            if slot is None and len(self._windows) >= self._max_keys:
                self._windows = {
                    k: v for k, v in self._windows.items() if now - v[0] < self.window_s
                }
            slot = [now, 0, 0]
            self._windows[key_id] = slot
        return slot, slot[0] + self.window_s - now

    async def check(self, principal: Principal, tokens: int, requests: int = 1) -> RateDecision:
        """Admit or refuse a request costing ``tokens`` and counting ``requests``."""
        if principal.rpm is None and principal.tpm is None:
            return unlimited()
        slot, reset = self._slot(principal.key_id)
        decision, charge = decide(
            principal.rpm, principal.tpm, int(slot[1]), int(slot[2]), tokens, reset, requests
        )
        if charge:
            slot[1] += requests
            slot[2] += tokens
        return decision

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        """Charge tokens learned after the request (actual minus estimated)."""
        if principal.tpm is None or tokens == 0:
            return
        slot, _ = self._slot(principal.key_id)
        slot[2] = max(0, slot[2] + tokens)
