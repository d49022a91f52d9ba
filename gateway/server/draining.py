"""``Draining``: whether this serving process has been asked to stop.

uvicorn installs its SIGTERM/SIGINT handlers before the app's lifespan starts and only
then waits for requests in flight; a request that merely waits (an idempotent retry
waiting for another request's answer) should give up at once instead of holding the
graceful shutdown up. ``install()`` (lifespan startup, main thread only) chains a handler
in front of the server's own, which still runs.

Example::

    draining = Draining()
    draining.install()            # in the lifespan, on the serving loop
    await draining.wait()         # returns once SIGTERM/SIGINT arrived
    draining.uninstall()
"""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Draining:
    def __init__(self) -> None:
        self.active = False
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._chained: dict[int, tuple[Any, Any]] = {}

    def install(self) -> None:
        """Watch for the stop signals (a no-op off the main thread: no signals there)."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in _SIGNALS:
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue  # the default or ignored: not a server's graceful stop

            def chained(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                self.begin()
                previous(signum, frame)

            signal.signal(sig, chained)
            self._chained[sig] = (chained, previous)

    def uninstall(self) -> None:
        for sig, (chained, previous) in self._chained.items():
            if signal.getsignal(sig) is chained:
                signal.signal(sig, previous)
        self._chained.clear()

    def begin(self) -> None:
        """Mark the process as stopping (safe from a signal handler)."""
        self.active = True
        if self._loop is not None and self._event is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self) -> None:
        """Return once the process is stopping (never, if ``install`` was not called)."""
        if self._event is None:
            await asyncio.Event().wait()
        else:
            await self._event.wait()
