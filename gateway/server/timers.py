"""``MovingDeadline``: a deadline that moves on every request, served by at most one timer.

A loop timer set and cancelled per request is a real part of a request's cost. A connection's
keep-alive / header deadline (``gateway.server.protocol``) and an upstream connection's read
timeout (``gateway.upstream.pool``) move on every request but almost never expire, so
each keeps one timer: moving the deadline later only records it, and the timer, when it
fires early, sets itself again for the deadline as it is then; moving it earlier
re-arms at once. The callback runs only once the deadline has passed.

Example::

    deadline = MovingDeadline(loop, on_timeout)
    deadline.set(loop.time() + 5.0)   # per request: no timer churn
    deadline.clear()                  # nothing to bound now (the timer, if any, idles out)
    deadline.cancel()                 # connection closed
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class MovingDeadline:
    """Calls ``callback`` once loop time reaches the deadline last ``set`` (not cleared)."""

    __slots__ = ("_callback", "_handle", "_handle_when", "_loop", "when")

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None
        self._handle_when = 0.0
        self.when: float | None = None

    def set(self, when: float) -> None:
        self.when = when
        if self._handle is None or when < self._handle_when:
            if self._handle is not None:
                self._handle.cancel()
            self._arm(when)

    def clear(self) -> None:
        """No deadline for now; a pending timer finds nothing to do when it fires."""
        self.when = None

    def cancel(self) -> None:
        self.when = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, when: float) -> None:
        self._handle = self._loop.call_at(when, self._fire)
        self._handle_when = when

    def _fire(self) -> None:
        self._handle = None
        when = self.when
        if when is None:
            return
        if self._loop.time() < when:  # moved on since the timer was set
            self._arm(when)
        else:
            self.when = None
            self._callback()
