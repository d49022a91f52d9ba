"""In-flight slots: how many upstream calls this process lets run at once.

A metered request takes one slot as it arrives (``enter``, in the outer middleware, before
its body is read); a chat request with ``n`` choices makes ``n`` concurrent upstream calls,
so once it is decoded it holds ``n`` (``hold``, at admission); every slot it holds is given
back when it ends (``leave``). A request that would take the count past ``limit`` is
refused at once with 503 ``overloaded`` and ``retry-after`` instead of queueing without
end. The slots a request holds are kept on its ``RequestContext`` (``slots``).

Single event loop, so plain counters are enough (no awaits between test and set).

Example::

    gate = InflightGate(512)
    gate.enter(ctx)        # raises Overloaded when full
    try:
        gate.hold(ctx, 4)  # n = 4: three more
        ...
    finally:
        gate.leave(ctx)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from gateway.context import RequestContext
from gateway.errors import Overloaded


def _overloaded() -> Overloaded:
    return Overloaded(
        "The gateway is handling too many requests; retry shortly.",
        headers={"retry-after": "1"},
    )


class InflightGate:
    """Counts the slots admitted requests hold; ``limit`` 0: unbounded."""

    __slots__ = ("inflight", "limit", "refused")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0
        self.refused = 0

    def enter(self, ctx: RequestContext) -> None:
        """One slot for a request that just arrived (raises ``Overloaded`` when full); the
        caller must call ``leave(ctx)`` exactly once after it succeeded."""
        if self.limit and self.inflight >= self.limit:
            self.refused += 1
            raise _overloaded()
        self.inflight += 1
        ctx.slots = 1
        ctx.gate = self

    def hold(self, ctx: RequestContext, n: int) -> None:
        """Make the request hold ``n`` slots, one per upstream call it runs at once."""
        extra = n - ctx.slots
        if extra <= 0:
            return
        if self.limit and self.inflight + extra > self.limit:
            self.refused += 1
            raise _overloaded()
        self.inflight += extra
        ctx.slots = n

    def leave(self, ctx: RequestContext) -> None:
        """Give back every slot the request holds."""
        self.inflight -= ctx.slots
        ctx.slots = 0

    @contextlib.contextmanager
    def admit(self, ctx: RequestContext) -> Iterator[None]:
        """``enter`` and ``leave`` around a block."""
        self.enter(ctx)
        try:
            yield
        finally:
            self.leave(ctx)
