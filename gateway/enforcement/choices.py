"""Streaming ``n > 1``: one hold-back per choice, merged into one sequence of batches.

Each choice is its own upstream stream with its own hold-back (its strict calls validated
and corrected independently); all of them add to the request's one ``Tally``. The merged
batches tag events with ``Choice(index)`` markers; per-choice ``FinalUsage`` events are
replaced by one at the end, over every call of every choice::

    multi = ChoiceStreams([holdback_for(...) for _ in range(n)], tally)
    async for batch in multi.batches():   # [Choice(1), TextDelta(..), Choice(0), ...]
        send(encode(batch))

The first batch is yielded once every choice's upstream answered (the commit point);
after that batches go out as any choice produces them. A failure in any choice ends the
whole stream (the others are cancelled and their upstreams closed).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import TypeVar

from gateway.context import Tally
from gateway.enforcement.holdback import Choice, FinalUsage, HeldEvent, HoldBack

__all__ = ["ChoiceStreams", "first_failure_or_results"]

_R = TypeVar("_R")

_Item = tuple[int, "list[HeldEvent] | BaseException | None"]


class ChoiceStreams:
    """The hold-backs of one request's choices, read as one stream."""

    def __init__(self, holds: Sequence[HoldBack], tally: Tally) -> None:
        self.holds = list(holds)
        self.tally = tally
        self._estimated = False

    @property
    def refusable(self) -> bool:
        """``HoldBack.refusable`` of the choices (all alike: one request's plan)."""
        return any(h.refusable for h in self.holds)

    def account_partial(self) -> bool:
        """``HoldBack.account_partial`` for every choice; True if any was estimated."""
        results = [h.account_partial() for h in self.holds]
        return any(results)

    def _tagged(self, index: int, batch: list[HeldEvent], out: list[HeldEvent]) -> None:
        events = []
        for event in batch:
            if isinstance(event, FinalUsage):
                self._estimated = self._estimated or event.estimated
            else:
                events.append(event)
        if events:
            out.append(Choice(index))
            out.extend(events)

    async def batches(self) -> AsyncGenerator[list[HeldEvent], None]:
        gens = [h.batches() for h in self.holds]
        queue: asyncio.Queue[_Item] = asyncio.Queue()

        async def pump(index: int, gen: AsyncGenerator[list[HeldEvent], None]) -> None:
            try:
                async for batch in gen:
                    queue.put_nowait((index, batch))
            except Exception as exc:  # handed to the reader, which raises it
                queue.put_nowait((index, exc))
            else:
                queue.put_nowait((index, None))

        tasks: list[asyncio.Future[None]] = []
        try:
            firsts = await _firsts(gens)
            out: list[HeldEvent] = []
            for i, batch in enumerate(firsts):
                self._tagged(i, batch, out)
            # A choice whose first batch ended it has nothing more to read.
            live = 0
            for i, (gen, batch) in enumerate(zip(gens, firsts, strict=True)):
                if any(isinstance(e, FinalUsage) for e in batch):
                    continue
                live += 1
                tasks.append(asyncio.ensure_future(pump(i, gen)))
            yield out
            while live:
                out = []
                while True:  # everything already queued goes out in one batch
                    index, item = await queue.get() if not out else queue.get_nowait()
                    if isinstance(item, BaseException):
                        raise item
                    if item is None:
                        live -= 1
                    else:
                        self._tagged(index, item, out)
                    if queue.empty() or not live:
                        break
                if out:
                    yield out
            tally = self.tally
            yield [FinalUsage(tally.total, tally.retries, tally.calls, self._estimated)]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for gen in gens:
                await gen.aclose()


async def _firsts(gens: list[AsyncGenerator[list[HeldEvent], None]]) -> list[list[HeldEvent]]:
    """Every choice's first batch; on a failure the other reads are cancelled first (a
    generator cannot be closed while a read of it is running)."""
    reads = [asyncio.ensure_future(anext(g)) for g in gens]
    try:
        await asyncio.wait(reads, return_when=asyncio.FIRST_EXCEPTION)
        return first_failure_or_results(reads)
    finally:
        for r in reads:
            r.cancel()
        await asyncio.gather(*reads, return_exceptions=True)


def first_failure_or_results(tasks: Sequence[asyncio.Future[_R]]) -> list[_R]:
    """After ``asyncio.wait(tasks, return_when=FIRST_EXCEPTION)``: raise the failure of the
    lowest-numbered choice that failed (others may still be running: reading their result
    would be ``InvalidStateError``), else every result, in order."""
    for task in tasks:
        if task.done() and not task.cancelled():
            exc = task.exception()
            if exc is not None:
                raise exc
    return [task.result() for task in tasks]
