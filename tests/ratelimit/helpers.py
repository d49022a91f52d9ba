"""What the Redis rate-limit tests share: the server, a window-edge guard, stored counts."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

REDIS_URL = "redis://127.0.0.1:6379/0"


async def away_from_window_edge(window_s: int = 60, margin_s: float = 3.0) -> None:
    """Start bursts well inside one window (by Redis time), so they can't straddle two."""
    client = aioredis.Redis.from_url(REDIS_URL)
    secs, micros = await client.time()
    await client.aclose()
    into = (secs + micros / 1e6) % window_s
    if into > window_s - margin_s:
        await asyncio.sleep(window_s - into + 0.1)


async def stored_counts(prefix: str, key_id: str) -> tuple[int, int]:
    """Requests and tokens Redis counts for the key's window (reservations included)."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        r, t = await client.hmget(f"{prefix}rl:{{{key_id}}}", ["r", "t"])
    finally:
        await client.aclose()
    return int(r or 0), int(t or 0)
