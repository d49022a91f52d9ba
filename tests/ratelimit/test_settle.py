"""Token settles ride on the key's next check (one Redis round trip per request), or
are flushed after a short delay; a settle is never lost to another replica or a restart."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from gateway.keys.base import Principal
from gateway.ratelimit.redis import RedisRateLimiter
from tests.ratelimit.helpers import REDIS_URL, stored_counts
from tests.support.gateway_proc import free_port


def _principal(tpm: int = 10_000) -> Principal:
    return Principal(f"key_{secrets.token_hex(4)}", "s", rpm=1000, tpm=tpm)


async def _stored_tokens(lim: RedisRateLimiter, p: Principal) -> int:
    return (await stored_counts(lim.prefix, p.key_id))[1]


def _count_scripts(lim: RedisRateLimiter) -> list[list[Any]]:
    """Record the args of every script the limiter sends."""
    sent: list[list[Any]] = []
    inner = lim._script

    async def counting(script: Any, *, keys: list[str], args: list[int]) -> Any:
        sent.append(list(args))
        return await inner(script, keys=keys, args=args)

    lim._script = counting  # type: ignore[method-assign]
    return sent


async def test_settle_rides_on_the_next_check(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, settle_delay_s=30.0)
    sent = _count_scripts(lim)
    p = _principal()
    try:
        for _ in range(3):
            assert (await lim.check(p, 100)).allowed
            await lim.add_tokens(p, 40)  # each answer was 40 tokens bigger than estimated
        assert len(sent) == 3  # one round trip per request, settles included
        assert [args[-1] for args in sent] == [0, 40, 40]
        assert lim.pending_settles == 1
        assert await _stored_tokens(lim, p) == 3 * 100 + 2 * 40
        last = await lim.check(p, 100)
        assert last.remaining_tokens == 10_000 - (4 * 100 + 3 * 40)
        assert lim.pending_settles == 0
    finally:
        await lim.aclose()


async def test_settle_without_a_next_request_is_flushed_for_other_replicas(
    prefix: str,
) -> None:
    a = RedisRateLimiter(REDIS_URL, prefix=prefix, settle_delay_s=0.05)
    b = RedisRateLimiter(REDIS_URL, prefix=prefix, settle_delay_s=0.05)
    p = _principal(tpm=1000)
    try:
        assert (await a.check(p, 300)).allowed
        await a.add_tokens(p, 500)
        await a.add_tokens(p, 100)  # two settles, one flush
        assert await _stored_tokens(a, p) == 300
        await asyncio.sleep(0.3)
        assert a.pending_settles == 0
        assert await _stored_tokens(a, p) == 900
        refused = await b.check(p, 300)  # another replica sees the settled tokens
        assert not refused.allowed and refused.remaining_tokens == 100
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.parametrize(
    ("cost", "settles", "then", "allowed", "stored"),
    [
        (300, [-200], 100, True, 200),  # smaller than estimated: room given back
        (300, [-900], 100, True, 100),  # never below zero
        (300, [650], 100, False, 950),  # refused, yet the settle is kept
        (300, [650, -600], 100, True, 450),  # deltas add up before they are sent
    ],
)
async def test_folded_settle_arithmetic(
    prefix: str, cost: int, settles: list[int], then: int, allowed: bool, stored: int
) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, settle_delay_s=30.0)
    p = _principal(tpm=1000)
    try:
        assert (await lim.check(p, cost)).allowed
        for delta in settles:
            await lim.add_tokens(p, delta)
        decision = await lim.check(p, then)
        assert decision.allowed is allowed
        assert await _stored_tokens(lim, p) == stored
        assert decision.remaining_tokens == 1000 - stored
    finally:
        await lim.aclose()


async def test_aclose_sends_pending_settles(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, settle_delay_s=30.0)
    p = _principal()
    assert (await lim.check(p, 10)).allowed
    await lim.add_tokens(p, 250)
    await lim.aclose()
    assert await _stored_tokens(lim, p) == 260


async def test_settle_for_an_ended_window_is_dropped(prefix: str) -> None:
    lim = RedisRateLimiter(REDIS_URL, prefix=prefix, window_s=1, settle_delay_s=30.0)
    p = _principal(tpm=1000)
    try:
        assert (await lim.check(p, 100)).allowed
        await lim.add_tokens(p, 700)
        await asyncio.sleep(1.1)  # the window ends before the next check
        fresh = await lim.check(p, 100)
        assert fresh.allowed and fresh.remaining_tokens == 900
    finally:
        await lim.aclose()


async def test_settle_redis_cannot_take_is_charged_locally() -> None:
    lim = RedisRateLimiter(f"redis://127.0.0.1:{free_port()}/0", settle_delay_s=30.0)
    p = _principal(tpm=100)
    try:
        await lim.add_tokens(p, 500)  # no outage seen yet: pending for the next check
        assert lim.pending_settles == 1
        decision = await lim.check(p, 10)  # Redis is down: both go to local limits
        assert lim.redis_down and lim.fallback_count == 1 and lim.pending_settles == 0
        assert not decision.allowed and decision.remaining_tokens == 0
        await lim.add_tokens(p, -500)  # during the outage: straight to local limits
        assert lim.pending_settles == 0
        assert (await lim.check(p, 10)).allowed
    finally:
        await lim.aclose()
