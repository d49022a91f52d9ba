"""What a hold-back yields, and the preamble hold a strict stream's first bytes wait on.

The preamble hold (``until_output``): when the request is strict (``HoldBack.refusable``),
the dialect's first bytes wait for the first batch that shows output, so a call that is
still invalid before anything was shown can be answered as a plain HTTP error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from gateway.canonical import StreamEvent, TextDelta, Usage, UsageReport
from gateway.canonical.record import record

__all__ = ["Choice", "FinalUsage", "HeldEvent", "shows_output", "until_output"]


@record
class FinalUsage:
    """Last event of a successful stream: usage over every upstream call of the request."""

    usage: Usage
    schema_retries: int
    upstream_calls: int
    estimated: bool = False


@record
class Choice:
    """With ``n > 1`` (``gateway.enforcement.choices``): the events after it, up to the next
    ``Choice``, belong to choice ``index``."""

    index: int


HeldEvent = StreamEvent | FinalUsage | Choice


def shows_output(batch: Sequence[HeldEvent]) -> bool:
    """Whether a batch carries anything a client would see after the preamble: text, a
    released call, the finish or the end (not usage reports or choice markers)."""
    for event in batch:
        if isinstance(event, TextDelta):
            if event.text:
                return True
        elif not isinstance(event, UsageReport | Choice):
            return True
    return False


async def until_output(batches: AsyncIterator[list[HeldEvent]]) -> list[HeldEvent]:
    """The batches up to and including the first that ``shows_output``, as one: what the
    preamble is held behind. Raises what the batches raise (a 422 before any output)."""
    held: list[HeldEvent] = []
    async for batch in batches:
        held.extend(batch)
        if shows_output(batch):
            return held
    return held  # pragma: no cover - the last batch ends with FinalUsage, which shows
