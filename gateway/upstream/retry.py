"""Retries for safe upstream failures only, within the request's one deadline.

Safe means the upstream cannot have acted on the request, or said it did not:

- the connection could not be made (``UpstreamConnectError``);
- the upstream answered 429, 502, 503 or 529 (``UpstreamStatusError``), honouring its
  ``retry-after`` when it sends one.

A reset or timeout after the request was sent, any other status and malformed answers
are not retried (the model may have run: a retry could double the cost). A stream is
retried only before its first event, i.e. before any byte of it reached the client.
Retries are bounded (``Settings.upstream_retries``), back off exponentially with jitter,
and never sleep past the request deadline (``RequestContext.deadline``): a ``retry-after``
longer than what is left fails at once.

Every retried attempt is billed: it is added to the request's tally
(``Tally.add_retried_attempt``, so the ledger's ``upstream_calls`` counts every attempt that
reached or tried to reach the upstream) with its ``retry_reason`` (``connect`` or the
upstream status), which ``/metrics`` exports as ``syntic_upstream_retries_total``.

Every attempt (and every correction) is announced to its request before a byte of it can
reach the provider: the request's ledger spools a provisional row
(``RequestContext.upstream_call_starting``), and a process killed during the call still
bills it when a restarted replica replays the spool.

Example::

    upstream = RetryingUpstream(adapter, RetryPolicy(retries=2), ctx)  # one per request
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

from gateway.canonical import ChatRequest, ChatResponse, StreamEvent
from gateway.context import RequestContext
from gateway.errors import UpstreamError
from gateway.settings import ModelConfig
from gateway.upstream.base import Upstream
from gateway.upstream.errors import UpstreamConnectError, UpstreamStatusError

__all__ = [
    "RETRY_STATUSES",
    "RetryPolicy",
    "RetryingUpstream",
    "UpstreamConnectError",
    "UpstreamStatusError",
    "parse_retry_after",
    "retry_reason",
    "retryable",
]

RETRY_STATUSES = frozenset({429, 502, 503, 529})  # 529: Anthropic's "overloaded"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``retry-after`` header (delta-seconds only; dates are ignored)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, UpstreamConnectError):
        return True
    if isinstance(exc, UpstreamStatusError):
        return exc.upstream_status in RETRY_STATUSES
    return False


def retry_reason(exc: BaseException) -> str:
    """A bounded label for why a retryable attempt failed: the upstream's status
    (``"429"``, ``"502"``, ``"503"``, ``"529"``) or ``"connect"``."""
    if isinstance(exc, UpstreamStatusError):
        return str(exc.upstream_status)
    return "connect"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most ``retries`` extra attempts, ``base_delay_s * 2**n`` (jittered, capped)."""

    retries: int = 2
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0
    margin_s: float = 0.05  # leave at least this much of the deadline for the attempt

    def delay(self, attempt: int, exc: BaseException, left_s: float | None = None) -> float | None:
        """Seconds to wait before retry number ``attempt + 1``, or None: do not retry.
        ``left_s``: what is left of the request deadline (None: no deadline)."""
        if attempt >= self.retries or not retryable(exc):
            return None
        hinted = exc.retry_after_s if isinstance(exc, UpstreamStatusError) else None
        if hinted is not None:
            wait = hinted
        else:
            wait = min(self.max_delay_s, self.base_delay_s * 2**attempt)
            wait *= random.uniform(0.5, 1.0)
        if left_s is not None and wait + self.margin_s >= left_s:
            return None  # the retry could not finish before the deadline
        return wait


class RetryingUpstream:
    """Wraps any ``Upstream`` with ``RetryPolicy`` for one request (see module docstring):
    each attempt is announced to it, its deadline bounds the waits and its tally counts the
    retried attempts (``ctx`` None: no deadline, nothing announced or counted)."""

    __slots__ = ("ctx", "inner", "policy", "retried")

    def __init__(
        self, inner: Upstream, policy: RetryPolicy, ctx: RequestContext | None = None
    ) -> None:
        self.inner = inner
        self.policy = policy
        self.ctx = ctx
        self.retried = 0

    def _delay(self, attempt: int, exc: BaseException) -> float | None:
        ctx = self.ctx
        wait = self.policy.delay(attempt, exc, ctx.remaining_s() if ctx is not None else None)
        if wait is not None and ctx is not None and ctx.tally is not None:
            ctx.tally.add_retried_attempt(retry_reason(exc))
        return wait

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        attempt = 0
        ctx = self.ctx
        while True:
            if ctx is not None:  # announced first: a crash mid-call still bills it
                ctx.upstream_call_starting()
            try:
                return await self.inner.complete(request, model)
            except UpstreamError as exc:
                wait = self._delay(attempt, exc)
                if wait is None:
                    raise
            attempt += 1
            self.retried += 1
            await asyncio.sleep(wait)

    async def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        attempt = 0
        ctx = self.ctx
        while True:
            if ctx is not None:  # at call time: an adapter may start the call before an event
                ctx.upstream_call_starting()
            events = self.inner.stream(request, model)
            yielded = False
            try:
                async for event in events:
                    yielded = True
                    yield event
                return
            except UpstreamError as exc:
                wait = None if yielded else self._delay(attempt, exc)
                if wait is None:
                    raise
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
            attempt += 1
            self.retried += 1
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        await self.inner.aclose()
