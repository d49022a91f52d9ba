"""CPU-heavy work on a large client body, off the event loop and a few at a time.

Parsing, decoding and re-encoding a request body costs time in proportion to its size
(and to how many items it holds): a few milliseconds at 256 KiB, hundreds at 3 MB of tiny
items. On the event loop that time is every other request's latency. Two kinds of job,
for bodies of ``threshold`` bytes or more (smaller ones run inline, where a hand-off would
cost more than it saves; a smaller body dense with objects counts as large: ``cost``):

- ``inspect``: the body parsed in a child process, which says only whether it is within
  the bounds (JSON, depth, ``max_input_items``) and whether it streams. Parsing builds
  one Python object per JSON value inside a single C call that holds the GIL, so no thread
  can do it without stopping the loop for as long: in another process it stops nothing,
  and a body refused there is never parsed here at all;
- ``run``: Python work (decoding a parsed body, re-encoding it for an upstream) in one of
  this process's threads; the interpreter hands the GIL back to the loop's thread every
  switch interval.

At most ``workers`` jobs run at once. When every worker is busy a request waits its turn
(first come, first served), bounded by what bounds the request itself: its deadline (504
past it) and its in-flight slot (so the waiters are at most ``max_inflight``, at most half
of them one key's). A waiter whose request is cancelled leaves the queue; a job already
running finishes and keeps its worker until then, so ``workers`` is a true bound.

Example::

    offload = Offload(threshold=256 * 1024, workers=2)
    size = offload.cost(body)
    verdict = await offload.inspect(body, size, 128, max_items=20_000, items=("messages",))
    chat = await offload.run(size, decode, body)
    offload.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import orjson

from gateway.bounds import (
    items_over,
    not_json_message,
    too_deep,
    too_deep_message,
    too_many_items_message,
)

log = logging.getLogger("syntic.offload")

# A body with this many objects costs about a millisecond to parse and decode on the
# loop: it goes to a worker whatever its size (docs/performance.md). Smaller bodies than
# DENSE_MIN_BYTES cannot hold that many.
DENSE_OBJECTS = 2048
DENSE_MIN_BYTES = 2 * DENSE_OBJECTS
PROCESS_RETRY_S = 10.0  # inspection processes that failed are not started again sooner

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _braces(body: bytes) -> int:
    """How many ``{`` bytes ``body`` holds. ``bytes.replace`` finds them with ``memchr``,
    where ``bytes.count`` tests every byte: about a sixth of the time on an agent's body."""
    return len(body) - len(body.replace(b"{", b""))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What ``inspect`` found: a refusal (``code``, ``message``, ``param``; None: within
    the bounds, or not looked at), whether the body asks to stream, and whether it was
    looked at (``checked``: JSON within the bounds when ``code`` is None)."""

    code: str | None = None
    message: str = ""
    param: str | None = None
    streaming: bool = False
    checked: bool = False


def inspect_body(body: bytes, max_depth: int, max_items: int, items: tuple[str, ...]) -> Verdict:
    """The bounds a client body is held to, checked on a parse that is then thrown away
    (in a child process: see module docstring)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return Verdict("invalid_json", not_json_message(exc))
    streaming = isinstance(data, dict) and data.get("stream") is True
    if isinstance(data, dict) and items:
        over = items_over(data, items, max_items)
        if over is not None:
            return Verdict(
                "too_many_input_items", too_many_items_message(max_items), over, streaming
            )
    deep = too_deep(body, data, max_depth)
    if deep is not None:
        return Verdict("invalid_json", too_deep_message(max_depth, deep), deep, streaming)
    return Verdict(streaming=streaming, checked=True)


class Offload:
    """Runs work on bodies of ``threshold`` bytes or more (or dense ones) off the loop:
    ``inspect`` in child processes, ``run`` in threads, ``workers`` jobs at once."""

    __slots__ = (
        "_executor",
        "_processes",
        "_processes_back_at",
        "_slots",
        "busy",
        "offloaded",
        "threshold",
        "waiting",
        "workers",
    )

    def __init__(self, threshold: int, workers: int) -> None:
        self.threshold = threshold
        self.workers = max(1, workers)
        self._executor: ThreadPoolExecutor | None = None  # started on first use
        self._processes: ProcessPoolExecutor | None = None  # started on first use
        self._processes_back_at = 0.0  # after a failure, not tried again before this
        self._slots: asyncio.Semaphore | None = None  # bound to the serving loop on first use
        self.offloaded = 0  # jobs run in a worker
        self.busy = 0  # workers running a job now
        self.waiting = 0  # jobs waiting for a worker now

    def off_loop(self, size: int) -> bool:
        """Whether work on ``size`` bytes goes to a worker."""
        return size >= self.threshold

    def cost(self, body: bytes) -> int:
        """The size ``body``'s work is judged by: its length, or the threshold for a
        smaller body dense with objects (what parsing and decoding cost grows with: a
        256 KiB body of tiny items takes tens of milliseconds, one of text a tenth of one).
        An upper bound on its objects, braces in strings included, one C pass."""
        size = len(body)
        if DENSE_MIN_BYTES <= size < self.threshold and _braces(body) >= DENSE_OBJECTS:
            return self.threshold
        return size

    async def run(
        self, size: int, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(*args, **kwargs)``, in a worker thread when ``size`` is at least the
        threshold."""
        if size < self.threshold:
            return fn(*args, **kwargs)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="syntic-body")
        return await self._job(self._executor, functools.partial(fn, *args, **kwargs))

    async def inspect(
        self,
        body: bytes,
        size: int,
        max_depth: int,
        max_items: int = 0,
        items: tuple[str, ...] = (),
    ) -> Verdict:
        """``inspect_body`` in a child process for a large body (``size``, its ``cost``);
        an empty ``Verdict`` for a small one (its parse costs less than the trip) or when
        the child died (the parse that follows finds what it finds)."""
        if size < self.threshold or time.monotonic() < self._processes_back_at:
            return Verdict()
        job = functools.partial(inspect_body, body, max_depth, max_items, items)
        try:
            if self._processes is None:
                # spawn: a fork would copy this process's threads' locks in whatever state.
                context = multiprocessing.get_context("spawn")
                self._processes = ProcessPoolExecutor(self.workers, mp_context=context)
            return await self._job(self._processes, job)
        except (BrokenProcessPool, OSError) as exc:
            # A child that died (OOM), or none could start (no /dev/shm, a process limit):
            # the parse in a thread still keeps the loop free of the decode.
            log.warning(
                "body inspection processes unavailable (%r); retried in %g s", exc, PROCESS_RETRY_S
            )
            self._processes = None
            self._processes_back_at = time.monotonic() + PROCESS_RETRY_S
            return Verdict()

    async def _job(self, executor: Executor, job: Callable[[], _T]) -> _T:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)  # bound to the serving loop
        slots = self._slots
        self.waiting += 1
        try:
            await slots.acquire()
        finally:
            self.waiting -= 1
        self.busy += 1
        self.offloaded += 1
        loop = asyncio.get_running_loop()
        try:
            submitted: concurrent.futures.Future[_T] = executor.submit(job)
        except BaseException:
            self._done(slots)
            raise
        # Freed when the job is done, not when the waiter is: a cancelled request's job
        # still runs to its end in its worker.
        submitted.add_done_callback(lambda _j: loop.call_soon_threadsafe(self._done, slots))
        return await asyncio.wrap_future(submitted)

    def _done(self, slots: asyncio.Semaphore) -> None:
        self.busy -= 1
        slots.release()

    def close(self) -> None:
        """Stop the workers (a job still running finishes first)."""
        for executor in (self._executor, self._processes):
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
        self._executor = self._processes = None
        self._slots = None
