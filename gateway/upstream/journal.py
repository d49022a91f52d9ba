"""``JournaledUpstream``: tells the current request an upstream call is about to start.

Wrapped inside the retry layer, so every attempt (and every correction) is announced
before a byte of it can reach the provider: the request's ledger spools a provisional row
(``RequestContext.upstream_call_starting``), and a process killed during the call still
bills it when a restarted replica replays the spool.

Example::

    registry.wrapped(lambda u: RetryingUpstream(JournaledUpstream(u), policy))
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from gateway.canonical import ChatRequest, ChatResponse, StreamEvent
from gateway.context import current_request
from gateway.settings import ModelConfig
from gateway.upstream.base import Upstream


class JournaledUpstream:
    """An ``Upstream`` that announces each call to the request it serves."""

    def __init__(self, inner: Upstream) -> None:
        self.inner = inner

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        _announce()
        return await self.inner.complete(request, model)

    def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        # Announced at call time: an adapter may start the call before the first event.
        _announce()
        return self.inner.stream(request, model)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _announce() -> None:
    ctx = current_request()
    if ctx is not None:
        ctx.upstream_call_starting()
