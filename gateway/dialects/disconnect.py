"""A client's disconnect cancels the request's task: one watcher task per stream, from the
preamble hold to the stream's last byte.

    watch = DisconnectWatch(receive)      # in the request's task, after the body was read
    try:
        await work()
    except asyncio.CancelledError:
        if not watch.consumed():
            raise                          # someone else's cancellation (a deadline)
        ...                                # the client left
    finally:
        await watch.stop()

A disconnect seen after ``disarm`` is not acted on (the work is over; the last send only
finds the connection closed).
"""

from __future__ import annotations

import asyncio

from starlette.types import Receive

__all__ = ["DisconnectWatch"]


class DisconnectWatch:
    """Cancels the task that created it when ``receive`` says ``http.disconnect``."""

    __slots__ = ("_task", "_watcher", "armed", "disconnected", "loop")

    def __init__(self, receive: Receive) -> None:
        # One running-loop lookup (each costs a getpid()); the task and the watcher
        # come from the loop.
        self.loop = loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None
        self._task = task
        self.armed = True
        self.disconnected = False
        self._watcher: asyncio.Future[None] = loop.create_task(_disconnected(receive))
        self._watcher.add_done_callback(self._on_done)

    def _on_done(self, watcher: asyncio.Future[None]) -> None:
        if watcher.cancelled() or watcher.exception() is not None or not self.armed:
            return
        self.disconnected = True
        self._task.cancel()

    def follow(self) -> None:
        """Cancel the calling task from now on (the one that goes on with the work)."""
        task = asyncio.current_task(self.loop)
        assert task is not None
        self._task = task

    def consumed(self) -> bool:
        """Call once per ``CancelledError``: True when it was this watch's (now consumed)."""
        return self.disconnected and self._task.uncancel() == 0

    def disarm(self) -> None:
        self.armed = False

    async def stop(self) -> None:
        """Disarm and end the watcher task."""
        self.armed = False
        watcher = self._watcher
        if not watcher.done():
            watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
