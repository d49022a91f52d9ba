"""Task deadlines: cancel a task at a loop time, cheaply enough for two per request.

- ``Deadlines`` / ``TaskDeadline``: cancel a task at a loop time; all of one loop's
  deadlines share one loop timer (the request and body deadlines, two per request).
- ``body_deadline``: wraps ASGI ``receive`` so the whole request body must arrive within
  ``body_timeout_s`` (a slowloris body gets 408 ``request_timeout`` and the connection is
  closed); reads after the body (disconnect watchers) are not bounded.

Example::

    deadlines = Deadlines(asyncio.get_running_loop())
    deadline = deadlines.arm(task, loop.time() + 30.0)
    try:
        await work()
    except asyncio.CancelledError:
        if not deadline.expired_here():
            raise
        ...  # timed out
    finally:
        deadline.disarm()
"""

from __future__ import annotations

import asyncio
import heapq
from heapq import heappush
from typing import Any

from starlette.types import Message, Receive

from gateway.errors import RequestTimeout


class TaskDeadline:
    """``asyncio.timeout``'s job without its Timeout object and state machine: cancel
    ``task`` at loop time ``when``. ``disarm`` it when the bounded work is over; after a
    ``CancelledError``, ``expired_here()`` says whether the cancellation was this
    deadline's (then consumed) rather than one from outside (to propagate).

    Made by ``Deadlines.arm`` (one loop timer shared by all), or on its own with a loop
    timer of its own (``TaskDeadline.timer``)."""

    __slots__ = ("_handle", "_owner", "_task", "expired", "live", "when")

    def __init__(self, task: asyncio.Task[Any], when: float, owner: Deadlines | None) -> None:
        self._task = task
        self.when = when
        self._owner = owner
        self._handle: asyncio.TimerHandle | None = None
        self.live = True
        self.expired = False

    @classmethod
    def timer(
        cls, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], when: float
    ) -> TaskDeadline:
        deadline = cls(task, when, None)
        deadline._handle = loop.call_at(when, deadline.fire)
        return deadline

    def fire(self) -> None:
        if self.live:
            self.disarm()
            self.expired = True
            self._task.cancel()

    def disarm(self) -> None:
        if self.live:
            self.live = False
            if self._owner is not None:
                self._owner.live -= 1
            elif self._handle is not None:
                self._handle.cancel()
                self._handle = None

    def expired_here(self) -> bool:
        return self.expired and self._task.uncancel() == 0


class Deadlines:
    """Task deadlines on one event loop, all served by one loop timer.

    A loop timer set and cancelled per request is costly next to the rest of the request
    (the request and body deadlines are two per request, nearly always disarmed long
    before they are due). Here arming is a heap push and disarming a flag: the heap keeps
    disarmed entries until they come up (or until they outnumber the live ones, then it
    is rebuilt), and the one timer is set for the earliest entry, re-set only when an earlier one is
    armed. Deadlines fire in order, each at or after its time."""

    __slots__ = ("_heap", "_seq", "_timer", "_timer_when", "live", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, TaskDeadline]] = []
        self._seq = 0  # ties: first armed, first served (and no comparing of entries)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0
        self.live = 0

    def __len__(self) -> int:
        """Armed deadlines (neither fired nor disarmed)."""
        return self.live

    def arm(self, task: asyncio.Task[Any], when: float) -> TaskDeadline:
        """Cancel ``task`` at loop time ``when`` unless disarmed first."""
        deadline = TaskDeadline(task, when, self)
        heap = self._heap
        seq = self._seq = self._seq + 1
        live = self.live = self.live + 1
        if len(heap) > 2 * live + 64:  # mostly disarmed: drop them
            heap[:] = [entry for entry in heap if entry[2].live]
            heapq.heapify(heap)
        heappush(heap, (when, seq, deadline))
        timer = self._timer
        if timer is None or when < self._timer_when:
            if timer is not None:
                timer.cancel()
            self._timer = self.loop.call_at(when, self._fire)
            self._timer_when = when
        return deadline

    def _fire(self) -> None:
        self._timer = None
        heap = self._heap
        now = self.loop.time()
        while heap:
            when, _, deadline = heap[0]
            if deadline.live and when > now:  # the timer came early: not due yet
                self._timer = self.loop.call_at(when, self._fire)
                self._timer_when = when
                return
            heapq.heappop(heap)
            deadline.fire()


def body_deadline(
    receive: Receive,
    timeout_s: float,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    task: asyncio.Task[Any] | None = None,
    deadlines: Deadlines | None = None,
) -> Receive:
    """``receive`` that raises ``RequestTimeout`` if the body is not complete within
    ``timeout_s`` of this call (0 = no deadline). ``loop`` and ``task`` (the task that
    reads the body) save a lookup each when the caller has them; with ``deadlines`` (on
    the same loop) the deadline shares its timer instead of setting one per read."""
    if timeout_s <= 0:
        return receive
    if loop is None:
        loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    done = False

    async def bounded() -> Message:
        nonlocal done
        if done:
            return await receive()
        reader = task if task is not None else asyncio.current_task()
        assert reader is not None and loop is not None
        timer = (
            deadlines.arm(reader, deadline)
            if deadlines is not None
            else TaskDeadline.timer(loop, reader, deadline)
        )
        try:
            message = await receive()
        except asyncio.CancelledError:
            if timer.expired_here():
                raise RequestTimeout(
                    f"The request body did not arrive within {timeout_s:g}s.",
                    headers={"connection": "close"},
                ) from None
            raise
        finally:
            timer.disarm()
        if message["type"] != "http.request" or not message.get("more_body", False):
            done = True
        return message

    return bounded
