"""Reservations: a busy key is admitted from slots reserved in Redis, without a round
trip per request; the fleet still never admits more than the limit, unused slots go back."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from gateway.keys.base import Principal
from gateway.ratelimit.base import RateDecision
from gateway.ratelimit.redis import RedisRateLimiter
from tests.ratelimit.helpers import REDIS_URL, run_together, stored_counts
from tests.ratelimit.helpers import away_from_window_edge as _away_from_window_edge


async def _stored(prefix: str, p: Principal) -> tuple[int, int]:
    return await stored_counts(prefix, p.key_id)


def _key(rpm: int | None = None, tpm: int | None = None) -> Principal:
    return Principal(f"key_{secrets.token_hex(4)}", "lease", rpm=rpm, tpm=tpm)


async def _checks(lim: RedisRateLimiter, p: Principal, n: int, cost: int) -> list[RateDecision]:
    """``n`` checks of ``cost`` tokens, away from a window's edge; the limiter closed after."""
    await _away_from_window_edge()
    try:
        return [await lim.check(p, cost) for _ in range(n)]
    finally:
        await lim.aclose()


async def test_busy_key_is_admitted_from_reservations_with_exact_headers(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, lease_max=64)
    p = _key(rpm=100_000, tpm=10_000_000)
    decisions = await _checks(lim, p, 300, 10)
    assert all(d.allowed for d in decisions)
    # One process alone: the counts it reports are exact, reservation or not.
    assert [d.remaining_requests for d in decisions] == list(range(99_999, 99_999 - 300, -1))
    assert [d.remaining_tokens for d in decisions] == [10_000_000 - 10 * i for i in range(1, 301)]
    assert lim.leased_count + lim.trip_count == 300
    assert lim.trip_count < 30, lim.trip_count  # instead of 300 round trips
    assert await _stored(prefix, p) == (300, 3000)  # the unused slots went back at close


async def test_token_only_key_from_reservations_reports_exact_tokens_and_reset(
    prefix: str,
) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, lease_max=64)
    p = _key(tpm=10_000_000)
    decisions = await _checks(lim, p, 200, 7)
    assert lim.leased_count > 100
    assert all(d.allowed and d.retry_after_s == 0.0 for d in decisions)
    assert {(d.limit_requests, d.remaining_requests) for d in decisions} == {(None, None)}
    assert [d.remaining_tokens for d in decisions] == [10_000_000 - 7 * i for i in range(1, 201)]
    assert all(0.0 < d.reset_s <= 60.0 for d in decisions)


async def test_without_leases_every_request_is_a_round_trip(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, lease_max=1)
    p = _key(rpm=100_000)
    try:
        for _ in range(50):
            assert (await lim.check(p, 1)).allowed
    finally:
        await lim.aclose()
    assert (lim.trip_count, lim.leased_count) == (50, 0)


async def test_small_limits_never_reserve(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, lease_max=64)
    p = _key(rpm=32)
    decisions = await _checks(lim, p, 40, 1)
    assert sum(d.allowed for d in decisions) == 32
    assert (lim.trip_count, lim.leased_count) == (40, 0)


async def test_idle_reservation_is_given_back(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, lease_max=64, lease_idle_s=0.2)
    p = _key(rpm=100_000)
    await _away_from_window_edge()
    try:
        for _ in range(20):
            assert (await lim.check(p, 1)).allowed
        held = lim.reserved
        stored, _ = await _stored(prefix, p)
        assert stored == 20 + held  # what is held is counted in Redis meanwhile
        await asyncio.sleep(0.6)
        assert lim.reserved == 0
        assert (await _stored(prefix, p))[0] == 20  # nothing held after the idle time
        assert (await lim.check(p, 1)).remaining_requests == 100_000 - 21
    finally:
        await lim.aclose()


async def test_concurrent_burst_in_one_process_admits_exactly_the_limit(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, lease_max=64)
    p = _key(rpm=400)
    await _away_from_window_edge()
    try:
        first = [await lim.check(p, 1) for _ in range(100)]  # sequential: leases grow
        rest = await asyncio.gather(*(lim.check(p, 1) for _ in range(500)))
    finally:
        await lim.aclose()
    assert sum(d.allowed for d in first) == 100
    assert sum(d.allowed for d in rest) == 300
    assert lim.leased_count > 0
    assert (await _stored(prefix, p))[0] == 400


PROCESS_SCRIPT = """
import asyncio, sys
from gateway.keys.base import Principal
from gateway.ratelimit.redis import RedisRateLimiter
async def main():
    rpm = None if sys.argv[4] == "-" else int(sys.argv[4])
    tpm = None if sys.argv[5] == "-" else int(sys.argv[5])
    lim = RedisRateLimiter(sys.argv[1], prefix=sys.argv[2], lease_max=64)
    p = Principal(sys.argv[3], "x", rpm=rpm, tpm=tpm)
    sys.stdin.readline()  # start together
    admitted = 0
    for _ in range(1000):
        admitted += (await lim.check(p, 10)).allowed
    await lim.aclose()
    print(admitted, lim.trip_count, lim.fallback_count)
asyncio.run(main())
"""


@pytest.mark.parametrize(("rpm", "tpm"), [("2000", "-"), ("-", "20000")])
async def test_four_processes_with_reservations_admit_exactly_the_limit(
    prefix: str, rpm: str, tpm: str
) -> None:
    key = f"key_{secrets.token_hex(4)}"
    await _away_from_window_edge(margin_s=15.0)
    words = await run_together(PROCESS_SCRIPT, REDIS_URL, prefix, key, rpm, tpm, wait_s=90)
    outs = [[int(x) for x in w] for w in words]
    admitted = sum(o[0] for o in outs)
    assert admitted <= 2000  # never more than the limit, reservations included
    assert admitted == 2000  # and the demand (4 x 1000) used every slot
    # Each refused request is one round trip; most admitted ones took none.
    assert sum(o[1] for o in outs) - (4000 - admitted) < admitted / 4
    assert all(o[2] == 0 for o in outs)


async def test_lease_entries_stay_bounded_over_many_keys(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, lease_max=64, max_leases=10)
    try:
        for _ in range(60):  # sixty keys, a request each: no reservation left anywhere
            assert (await lim.check(_key(rpm=5), 1)).allowed
        assert len(lim._leases) <= 10
        busy = _key(rpm=100_000)
        for _ in range(30):  # one busy key holding slots survives every purge
            assert (await lim.check(busy, 1)).allowed
        held = lim.reserved
        assert held > 0
        for _ in range(30):
            assert (await lim.check(_key(rpm=5), 1)).allowed
        assert len(lim._leases) <= 11 and lim.reserved == held
    finally:
        await lim.aclose()
    assert (await _stored(prefix, busy))[0] == 30  # and its slots still went back at close
