"""``JournaledUpstream``: tells its request an upstream call is about to start.

Wrapped inside the retry layer, so every attempt (and every correction) is announced
before a byte of it can reach the provider: the request's ledger spools a provisional row
(``RequestContext.upstream_call_starting``), and a process killed during the call still
bills it when a restarted replica replays the spool.

Example::

    upstream = RetryingUpstream(JournaledUpstream(adapter, ctx), policy, ctx)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine
from typing import Any

from gateway.canonical import ChatRequest, ChatResponse, StreamEvent
from gateway.context import RequestContext
from gateway.settings import ModelConfig
from gateway.upstream.base import Upstream


class JournaledUpstream:
    """An ``Upstream`` that announces each call to the request it serves (made per
    request; ``ctx`` None: nothing to announce to)."""

    __slots__ = ("ctx", "inner")

    def __init__(self, inner: Upstream, ctx: RequestContext | None) -> None:
        self.inner = inner
        self.ctx = ctx

    def complete(
        self, request: ChatRequest, model: ModelConfig
    ) -> Coroutine[Any, Any, ChatResponse]:
        # Not a coroutine itself: the caller awaits the adapter's call directly, one frame
        # fewer on every suspension (announced at call time, as ``stream`` is).
        if self.ctx is not None:
            self.ctx.upstream_call_starting()
        return self.inner.complete(request, model)

    def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        # Announced at call time: an adapter may start the call before the first event.
        if self.ctx is not None:
            self.ctx.upstream_call_starting()
        return self.inner.stream(request, model)

    async def aclose(self) -> None:
        await self.inner.aclose()
