"""Redis limits: one atomic script shared by every client, server time, and the local
fallback when Redis is down (counted, logged once, recovered from)."""

from __future__ import annotations

import asyncio
import logging
import secrets

import pytest

from gateway.keys.base import Principal
from gateway.ratelimit.redis import RedisRateLimiter
from tests.ratelimit.helpers import REDIS_URL, run_together
from tests.ratelimit.helpers import away_from_window_edge as _away_from_window_edge
from tests.support.gateway_proc import free_port
from tests.support.private_services import PrivateRedis


async def test_concurrent_burst_from_separate_clients_admits_exactly_the_limit(
    prefix: str,
) -> None:
    limiters = [RedisRateLimiter(REDIS_URL, prefix=prefix) for _ in range(3)]
    p = Principal(f"key_{secrets.token_hex(4)}", "burst", rpm=25)
    await _away_from_window_edge()
    try:
        results = await asyncio.gather(*(lim.check(p, 1) for lim in limiters for _ in range(40)))
    finally:
        for lim in limiters:
            await lim.aclose()
    assert sum(d.allowed for d in results) == 25
    assert all(lim.fallback_count == 0 for lim in limiters)
    remaining = sorted(d.remaining_requests or 0 for d in results if d.allowed)
    assert remaining == list(range(25))  # every admitted request saw a distinct count


BURST_SCRIPT = """
import asyncio, sys
from gateway.keys.base import Principal
from gateway.ratelimit.redis import RedisRateLimiter
from tests.ratelimit.helpers import REDIS_URL, run_together
from tests.ratelimit.helpers import away_from_window_edge as _away_from_window_edge
from tests.support.gateway_proc import free_port
from tests.support.private_services import PrivateRedis
async def main():
    lim = RedisRateLimiter(sys.argv[1], prefix=sys.argv[2])
    p = Principal(sys.argv[3], "x", rpm=int(sys.argv[4]), tpm=int(sys.argv[5]))
    sys.stdin.readline()  # start together
    res = await asyncio.gather(*(lim.check(p, 10) for _ in range(30)))
    await lim.aclose()
    print(sum(d.allowed for d in res), lim.fallback_count)
asyncio.run(main())
"""


async def test_burst_across_processes_shares_one_limit(prefix: str) -> None:
    key = f"key_{secrets.token_hex(4)}"
    await _away_from_window_edge(margin_s=10.0)
    outs = await run_together(BURST_SCRIPT, REDIS_URL, prefix, key, "1000", "370")
    assert sum(int(o[0]) for o in outs) == 37  # tpm 370 at 10 tokens each
    assert all(o[1] == "0" for o in outs)


async def test_tokens_headers_and_add_tokens(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix)
    p = Principal(f"key_{secrets.token_hex(4)}", "t", rpm=100, tpm=1000)
    await _away_from_window_edge()
    try:
        first = await lim.check(p, 300)
        assert first.allowed
        assert (first.limit_requests, first.remaining_requests) == (100, 99)
        assert (first.limit_tokens, first.remaining_tokens) == (1000, 700)
        assert 0 < first.reset_s <= 60 and first.retry_after_s == 0
        await lim.add_tokens(p, 500)  # actual usage was larger than estimated
        refused = await lim.check(p, 300)
        assert not refused.allowed
        assert refused.remaining_tokens == 200 and refused.remaining_requests == 99
        assert 0 < refused.retry_after_s <= 60
        assert (await lim.check(p, 150)).allowed  # a smaller one still fits
    finally:
        await lim.aclose()


async def test_unlimited_key_never_touches_redis() -> None:
    lim = RedisRateLimiter(f"redis://127.0.0.1:{free_port()}/0")
    try:
        d = await lim.check(Principal("key_u", "u"), 10**9)
        assert d.allowed and lim.fallback_count == 0 and not lim.redis_down
    finally:
        await lim.aclose()


async def test_redis_down_falls_back_locally_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lim = RedisRateLimiter(f"redis://127.0.0.1:{free_port()}/0", backoff_s=0.05)
    p = Principal("key_down", "d", rpm=3)
    caplog.set_level(logging.WARNING, logger="syntic.ratelimit")
    try:
        results = []
        async with asyncio.timeout(10):  # a hang guard; refused connections answer at once
            for _ in range(10):
                results.append(await lim.check(p, 1))
                await asyncio.sleep(0.02)
    finally:
        await lim.aclose()
    assert sum(d.allowed for d in results) == 3  # local limits still apply
    # one outage, every check answered locally: none waited for Redis to come back
    assert lim.fallback_count == 10 and lim.outage_count == 1 and lim.redis_down
    warnings = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(warnings) == 1


async def test_redis_stopped_mid_run_then_restarted(private_redis: PrivateRedis) -> None:
    lim = RedisRateLimiter(private_redis.url, backoff_s=0.1, max_backoff_s=0.2)
    p = Principal("key_mid", "m", rpm=1000)
    try:
        assert (await lim.check(p, 1)).allowed and not lim.redis_down
        private_redis.stop()
        served = [await lim.check(p, 1) for _ in range(5)]
        assert all(d.allowed for d in served)  # still serving
        assert lim.redis_down and lim.fallback_count == 5 and lim.outage_count == 1
        private_redis.start()
        await asyncio.sleep(0.3)  # past the backoff
        back = await lim.check(p, 1)
        assert back.allowed and not lim.redis_down
        assert lim.fallback_count == 5
        # Counting resumed on Redis: the restarted server knew nothing, so 1 request so far.
        assert back.remaining_requests == 999
    finally:
        await lim.aclose()


async def test_huge_burst_queues_instead_of_faking_an_outage(prefix: str) -> None:
    """More concurrent checks than connections: they wait their turn; none falls back."""
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, max_connections=4)
    p = Principal(f"key_{secrets.token_hex(4)}", "huge", rpm=500)
    await _away_from_window_edge()
    try:
        results = await asyncio.gather(*(lim.check(p, 1) for _ in range(2000)))
    finally:
        await lim.aclose()
    assert lim.fallback_count == 0 and lim.outage_count == 0
    assert sum(d.allowed for d in results) == 500
