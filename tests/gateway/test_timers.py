"""``MovingDeadline``: one timer for a deadline that moves (the edge protocol's keep-alive /
header deadline and the upstream pool's read timeout share it)."""

from __future__ import annotations

import asyncio

from gateway.server.timers import MovingDeadline


async def test_fires_once_at_the_latest_deadline_set_and_earlier_moves_re_arm() -> None:
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    done = asyncio.Event()

    def fire() -> None:
        fired.append(loop.time())
        done.set()

    deadline = MovingDeadline(loop, fire)
    deadline.set(loop.time() + 0.05)
    deadline.set(loop.time() + 60)  # later: recorded, the 0.05 s timer re-arms when it fires
    await asyncio.sleep(0.12)
    assert fired == []
    moved_to = loop.time() + 0.03
    deadline.set(moved_to)  # earlier than 60 s: re-armed at once (else the wait times out)
    await asyncio.wait_for(done.wait(), 10)
    await asyncio.sleep(0.05)  # room for a second, wrong firing
    assert len(fired) == 1
    assert fired[0] >= moved_to - 0.001  # never early (asyncio's clock resolution aside)


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
