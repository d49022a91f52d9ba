"""``MovingDeadline``: one timer for a deadline that moves (the edge protocol's keep-alive /
header deadline and the upstream pool's read timeout share it)."""

from __future__ import annotations

import asyncio

from gateway.server.timers import MovingDeadline


async def test_fires_once_at_the_latest_deadline_set_and_earlier_moves_re_arm() -> None:
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    start = loop.time()
    deadline = MovingDeadline(loop, lambda: fired.append(loop.time() - start))
    deadline.set(start + 0.05)
    deadline.set(start + 0.20)  # later: recorded, the 0.05 s timer re-arms when it fires
    await asyncio.sleep(0.12)
    assert fired == []
    deadline.set(loop.time() + 0.03)  # earlier than 0.20: re-armed at once
    await asyncio.sleep(0.15)
    assert len(fired) == 1 and 0.14 <= fired[0] < 0.2


async def test_cleared_or_cancelled_never_fires() -> None:
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    cleared = MovingDeadline(loop, lambda: fired.append("cleared"))
    cancelled = MovingDeadline(loop, lambda: fired.append("cancelled"))
    cleared.set(loop.time() + 0.02)
    cancelled.set(loop.time() + 0.02)
    cleared.clear()
    cancelled.cancel()
    await asyncio.sleep(0.08)
    assert fired == []
    cleared.set(loop.time() + 0.02)  # usable again after clear()
    await asyncio.sleep(0.08)
    assert fired == ["cleared"]
