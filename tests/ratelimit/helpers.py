"""What the Redis rate-limit tests share: the server, a window-edge guard, stored counts."""

from __future__ import annotations

import asyncio
import subprocess
import sys

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


async def run_together(script: str, *args: str, n: int = 4, wait_s: float = 60) -> list[list[str]]:
    """Start ``n`` interpreters on ``script`` (which reads one line from stdin before its
    burst), release them together, and return each one's stdout split into words."""
    procs = [
        subprocess.Popen(  # noqa: ASYNC220 - plain Popen is fine for a test driver
            [sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    await asyncio.sleep(1.5)  # let the interpreters import
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return [proc.communicate(timeout=wait_s)[0].split() for proc in procs]
