"""Per-process limits: the fixed-window rule, headers' numbers, window turnover."""

from __future__ import annotations

import pytest

from gateway.keys.base import Principal
from gateway.ratelimit.local import LocalRateLimiter


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("rpm", "tpm", "cost", "requests", "admitted"),
    [
        (5, None, 10, 12, 5),  # request limit
        (None, 1000, 300, 10, 3),  # token limit: 300+300+300, the 4th would be 1200
        (None, 100, 500, 3, 1),  # a request bigger than the budget fits an empty window only
        (10, 1000, 250, 10, 4),  # tokens bind before requests
        (None, None, 10**6, 50, 50),  # unlimited
    ],
)
async def test_admits_up_to_the_limits(
    rpm: int | None, tpm: int | None, cost: int, requests: int, admitted: int
) -> None:
    limiter = LocalRateLimiter(clock=Clock(6000.0))
    p = Principal("key_a", "a", rpm=rpm, tpm=tpm)
    decisions = [await limiter.check(p, cost) for _ in range(requests)]
    assert sum(d.allowed for d in decisions) == admitted
    assert all(d.allowed for d in decisions[:admitted])


async def test_decision_numbers_for_headers() -> None:
    clock = Clock(6000.0 + 15.0)  # windows start at a key's first request
    limiter = LocalRateLimiter(clock=clock)
    p = Principal("key_h", "h", rpm=2, tpm=100)
    first = await limiter.check(p, 30)
    assert (first.allowed, first.limit_requests, first.remaining_requests) == (True, 2, 1)
    assert (first.limit_tokens, first.remaining_tokens) == (100, 70)
    assert first.reset_s == pytest.approx(60.0)
    assert first.retry_after_s == 0
    await limiter.check(p, 30)
    clock.now += 15.0
    refused = await limiter.check(p, 30)
    assert not refused.allowed
    assert refused.remaining_requests == 0
    assert refused.retry_after_s == pytest.approx(45.0)


async def test_window_turnover_and_key_isolation() -> None:
    clock = Clock(6000.0)
    limiter = LocalRateLimiter(clock=clock)
    a, b = Principal("key_a", "a", rpm=1), Principal("key_b", "b", rpm=1)
    assert (await limiter.check(a, 1)).allowed
    assert not (await limiter.check(a, 1)).allowed
    assert (await limiter.check(b, 1)).allowed  # another key has its own budget
    clock.now += 59.0
    assert not (await limiter.check(a, 1)).allowed  # same window, anchored at the first
    clock.now += 1.0
    assert (await limiter.check(a, 1)).allowed  # next window


async def test_add_tokens_charges_the_current_window() -> None:
    limiter = LocalRateLimiter(clock=Clock(6000.0))
    p = Principal("key_t", "t", tpm=1000)
    assert (await limiter.check(p, 100)).remaining_tokens == 900
    await limiter.add_tokens(p, 850)  # the response was bigger than estimated
    refused = await limiter.check(p, 100)
    assert not refused.allowed and refused.remaining_tokens == 50
