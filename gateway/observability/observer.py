"""What the gateway observes per request and per call: the request observer (metrics and
the per-request log line) and the metered wrappers of the rate limiter and the upstreams.

Example::

    observer = RequestObserver(metrics, route_paths)  # paths with a label of their own
    GatewayMiddleware(app, ..., observer=observer)
    upstream = MeteredUpstream(adapter, metrics)
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from gateway.canonical import ChatRequest, ChatResponse, StreamEvent
from gateway.context import RequestContext
from gateway.keys.base import Principal
from gateway.observability.logs import RequestLog, log_request
from gateway.observability.metrics import GatewayMetrics
from gateway.ratelimit.base import RateDecision, RateLimiter
from gateway.settings import ModelConfig
from gateway.upstream.base import Upstream

# Paths probed every few seconds: counted in metrics, but not logged line by line.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class MeteredLimiter:
    """A ``RateLimiter`` that counts its decisions."""

    def __init__(self, inner: RateLimiter, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self.path = metrics.path

    async def check(self, principal: Principal, tokens: int, requests: int = 1) -> RateDecision:
        decision = await self.inner.check(principal, tokens, requests)
        self.path.count_rate_decision(decision.allowed)
        return decision

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        await self.inner.add_tokens(principal, tokens)


class MeteredUpstream:
    """An ``Upstream`` that times each call (label: the catalogue model name)."""

    def __init__(self, inner: Upstream, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self.path = metrics.path

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        start = time.perf_counter()
        try:
            return await self.inner.complete(request, model)
        finally:
            self.path.observe_upstream(model.name, time.perf_counter() - start)

    def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        # Call the adapter now (not on first iteration), exactly as an unwrapped call would.
        return self._timed(self.inner.stream(request, model), model.name, time.perf_counter())

    async def _timed(
        self, events: AsyncIterator[StreamEvent], model: str, start: float
    ) -> AsyncIterator[StreamEvent]:
        try:
            async for event in events:
                yield event
        finally:
            closer = getattr(events, "aclose", None)
            if closer is not None:
                await closer()
            self.path.observe_upstream(model, time.perf_counter() - start)

    async def aclose(self) -> None:
        await self.inner.aclose()


class RequestObserver:
    """Called by the outer middleware around every HTTP request: the in-flight count (the
    in-flight gauge reads it), ``syntic_requests_total``, upstream call counts, and the
    per-request log line."""

    def __init__(self, metrics: GatewayMetrics, routes: frozenset[str]) -> None:
        self.path = metrics.path  # the request path's series, one attribute hop away
        self.routes = routes
        self.inflight = 0  # the event loop's requests between started and finished

    def started(self, ctx: RequestContext) -> None:
        self.inflight += 1

    def finished(self, ctx: RequestContext) -> None:
        self.inflight -= 1
        path = ctx.endpoint
        route = path if path in self.routes else "other"  # bounded label cardinality
        series = self.path
        code = ctx.error_code
        series.count_request(route, ctx.status, code)
        tally = ctx.tally
        retries = tally.retries if tally is not None else 0
        if tally is not None and (calls := tally.calls):
            retried = tally.retried_attempts
            series.count_upstream_calls(
                ctx.model or "",
                calls - retries - (sum(retried.values()) if retried else 0),
                retries,
                retried,
            )
        if code == "overloaded":  # only the in-flight gate uses this code
            series.count_inflight_refused()
        if path in QUIET_PATHS:
            return
        principal = ctx.principal
        log_request(
            RequestLog(  # positional, in field order (one per request)
                ctx.request_id,
                route,
                ctx.status,
                (time.perf_counter() - ctx.started_mono) * 1000.0,
                principal.key_id if principal else None,
                ctx.model,
                code,
                retries,
                ctx.streamed,
            )
        )
