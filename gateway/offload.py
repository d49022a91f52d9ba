"""CPU-heavy work on a large client body, off the event loop and a few at a time.

Parsing, decoding and re-encoding a request body costs time in proportion to its size
(and to how many items it holds): a few milliseconds at 256 KiB, hundreds at 3 MB of tiny
items. On the event loop that time is every other request's latency. ``Offload.run`` runs
such work in one of ``workers`` threads when ``size`` is at least ``threshold``, and
inline below it, where a thread hand-off would cost more than it saves. The loop stays
free because the work is Python (the interpreter hands the GIL back to the loop's thread
every switch interval); a single C call (``orjson.loads`` of the whole body) still holds it
for its own duration, which the body cap bounds.

When every worker is busy a request waits its turn (first come, first served), bounded by
what bounds the request itself: its deadline (504 past it) and its in-flight slot (so the
number of waiters is at most ``max_inflight``, at most half of them one key's). A waiter
whose request is cancelled leaves the queue; work already running finishes in its thread
and keeps its worker until then, so ``workers`` is a true bound.

Example::

    offload = Offload(threshold=256 * 1024, workers=2)
    data = await offload.run(len(body), orjson.loads, body)
    offload.close()
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Offload:
    """Runs work on bodies of ``threshold`` bytes or more in ``workers`` threads."""

    __slots__ = ("_executor", "_slots", "busy", "inline", "offloaded", "threshold", "waiting",
                 "workers")

    def __init__(self, threshold: int, workers: int) -> None:
        self.threshold = threshold
        self.workers = max(1, workers)
        self._executor: ThreadPoolExecutor | None = None  # started on first use
        self._slots: asyncio.Semaphore | None = None  # bound to the serving loop on first use
        self.inline = 0  # jobs run on the loop (below the threshold)
        self.offloaded = 0  # jobs run in a worker
        self.busy = 0  # workers running a job now
        self.waiting = 0  # jobs waiting for a worker now

    def off_loop(self, size: int) -> bool:
        """Whether work on ``size`` bytes goes to a worker."""
        return size >= self.threshold

    async def run(
        self, size: int, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(*args, **kwargs)``, in a worker when ``size`` is at least the threshold."""
        if size < self.threshold:
            self.inline += 1
            return fn(*args, **kwargs)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="syntic-body")
        slots = self._slots
        self.waiting += 1
        try:
            await slots.acquire()
        finally:
            self.waiting -= 1
        self.busy += 1
        self.offloaded += 1
        loop = asyncio.get_running_loop()
        assert self._executor is not None
        job = self._executor.submit(functools.partial(fn, *args, **kwargs))
        # Freed when the thread is done, not when the waiter is: a cancelled request's job
        # still runs to its end in its worker.
        job.add_done_callback(lambda _j: loop.call_soon_threadsafe(self._done, slots))
        return await asyncio.wrap_future(job)

    def _done(self, slots: asyncio.Semaphore) -> None:
        self.busy -= 1
        slots.release()

    def close(self) -> None:
        """Stop the workers (a job still running finishes first)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            self._slots = None
