"""Operating the gateway: health, readiness, metrics, the per-request log line.

``Ops`` is built once by ``create_app`` and holds the metric registry, the readiness probe
and the request observer. Its routes take no authentication (they live outside ``/v1``):

- ``GET /healthz``: the process is alive and its event loop answers. No I/O.
- ``GET /readyz``: the database answers and at least one model is configured, else 503
  with the failing checks. Redis (when configured) is checked too, but an unreachable
  Redis only *degrades* readiness (200, ``"redis": "degraded"``, ``syntic_redis_up`` 0):
  the gateway keeps serving with per-process limits, and a Redis outage must not take
  every replica of a fleet out of rotation at once.
- ``GET /metrics``: Prometheus text. Unauthenticated: keep it off the public listener
  (deploy/nginx.conf returns 404 for it).

Wiring (in ``create_app``)::

    ops = Ops(settings)
    ...GatewayMiddleware(..., observer=ops.observer)
    # lifespan, once services and upstreams exist:
    limiter = ops.meter_limiter(services.limiter)
    registry = registry.wrapped(ops.meter_upstream)
    ops.bind(services, service.lint_cache)
    ...
    await ops.aclose()
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.canonical import ChatRequest, ChatResponse, StreamEvent
from gateway.context import RequestContext
from gateway.keys.base import Principal
from gateway.observability.logs import RequestLog, log_request
from gateway.observability.metrics import CONTENT_TYPE, GatewayMetrics
from gateway.ratelimit.base import RateDecision, RateLimiter
from gateway.settings import ModelConfig, Settings
from gateway.storage.base import StorageError
from gateway.upstream.base import Upstream

log = logging.getLogger("syntic.ops")

# Paths probed every few seconds: counted in metrics, but not logged line by line.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One readiness check. ``reason`` is safe to show unauthenticated (no URLs, no
    driver messages: those go to the log)."""

    name: str
    ok: bool
    ms: float
    reason: str | None = None
    fatal: bool = True  # False: a failure degrades readiness but does not fail it


class Readiness:
    """Database, Redis and model-catalogue checks, each bounded by ``timeout_s``.
    Only the database and models checks are fatal; ``redis_ok`` keeps the last Redis
    result (None: not configured or not probed yet)."""

    def __init__(self, settings: Settings, timeout_s: float = 2.0) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.database: Any = None  # gateway.storage.Database, set by Ops.bind
        self.redis_ok: bool | None = None
        self._redis: Any = None
        if settings.redis_url:
            self._redis = aioredis.Redis.from_url(
                settings.redis_url,
                socket_connect_timeout=timeout_s,
                socket_timeout=timeout_s,
            )

    async def _timed(self, name: str, probe: Callable[[], Any]) -> CheckResult:
        start = time.perf_counter()
        try:
            await asyncio.wait_for(probe(), self.timeout_s)
        except TimeoutError:
            reason = f"{name} did not answer within {self.timeout_s:g} s"
        except (StorageError, aioredis.RedisError, OSError) as exc:
            log.warning("readiness: %s unreachable: %r", name, exc)
            reason = f"{name} unreachable ({type(exc).__name__})"
        else:
            return CheckResult(name, True, (time.perf_counter() - start) * 1000)
        return CheckResult(name, False, (time.perf_counter() - start) * 1000, reason)

    async def check(self) -> list[CheckResult]:
        """Run every check concurrently."""
        probes: list[Any] = []
        if self.database is None:
            probes.append(_result(CheckResult("database", False, 0.0, "database not open")))
        else:
            probes.append(self._timed("database", lambda: self.database.fetch("SELECT 1")))
        if self._redis is not None:
            probes.append(self._timed("redis", self._redis.ping))
        n = len(self.settings.models)
        models = CheckResult("models", n > 0, 0.0, None if n else "no model configured")
        probes.append(_result(models))
        results = list(await asyncio.gather(*probes))
        for i, r in enumerate(results):
            if r.name == "redis":
                self.redis_ok = r.ok
                results[i] = dataclasses.replace(r, fatal=False)  # limits fall back locally
        return results

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()


async def _result(result: CheckResult) -> CheckResult:
    return result


class MeteredLimiter:
    """A ``RateLimiter`` that counts its decisions."""

    def __init__(self, inner: RateLimiter, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def check(self, principal: Principal, tokens: int) -> RateDecision:
        decision = await self.inner.check(principal, tokens)
        self.metrics.count_rate_decision(decision.allowed)
        return decision

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        await self.inner.add_tokens(principal, tokens)


class MeteredUpstream:
    """An ``Upstream`` that times each call (label: the catalogue model name)."""

    def __init__(self, inner: Upstream, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        start = time.perf_counter()
        try:
            return await self.inner.complete(request, model)
        finally:
            self.metrics.observe_upstream(model.name, time.perf_counter() - start)

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
            self.metrics.observe_upstream(model, time.perf_counter() - start)

    async def aclose(self) -> None:
        await self.inner.aclose()


class RequestObserver:
    """Called by the outer middleware around every HTTP request: the in-flight count (the
    in-flight gauge reads it), ``syntic_requests_total``, upstream call counts, and the
    per-request log line."""

    def __init__(self, metrics: GatewayMetrics, routes: frozenset[str]) -> None:
        self.metrics = metrics
        self.routes = routes
        self.inflight = 0  # the event loop's requests between started and finished

    def started(self, ctx: RequestContext) -> None:
        self.inflight += 1

    def finished(self, ctx: RequestContext) -> None:
        self.inflight -= 1
        path = ctx.endpoint
        route = path if path in self.routes else "other"  # bounded label cardinality
        self.metrics.count_request(route, ctx.status, ctx.error_code)
        tally = ctx.tally
        retries = tally.retries if tally is not None else 0
        if tally is not None and tally.upstream_calls:
            retried = tally.retried_attempts
            self.metrics.count_upstream_calls(
                ctx.model or "",
                first=tally.upstream_calls - retries - (sum(retried.values()) if retried else 0),
                corrections=retries,
                retried=retried,
            )
        if ctx.error_code == "overloaded":  # only the in-flight gate uses this code
            self.metrics.inflight_refused.inc()
        if path in QUIET_PATHS:
            return
        log_request(
            RequestLog(
                request_id=ctx.request_id,
                route=route,
                status=ctx.status,
                latency_ms=(time.perf_counter() - ctx.started_mono) * 1000.0,
                key_id=ctx.principal.key_id if ctx.principal else None,
                model=ctx.model,
                code=ctx.error_code,
                schema_retries=retries,
                streamed=ctx.streamed,
            )
        )


_ROUTE_PATHS = frozenset(
    {
        "/healthz", "/readyz", "/metrics", "/openapi.json", "/v1/models",
        "/v1/chat/completions", "/v1/messages", "/v1/schemas/check",
        "/admin/keys", "/admin/usage", "/admin/requests", "/admin/schemas/check", "/console",
    }
)  # fmt: skip


class Ops:
    """The operational side of one app: metrics, readiness, the request observer."""

    def __init__(self, settings: Settings, metrics: GatewayMetrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or GatewayMetrics.create()
        self.readiness = Readiness(settings)
        self.observer = RequestObserver(self.metrics, _ROUTE_PATHS)
        self.metrics.bind(inflight=lambda: self.observer.inflight)
        self._limiter: Any = None
        self._feeding: asyncio.Task[None] | None = None
        if settings.redis_url:  # exported only when Redis is configured
            self.metrics.fed_gauge(
                "syntic_redis_up",
                "1 when Redis answers; 0 when the last readiness probe or rate-limit call "
                "found it unreachable (limits are then per process).",
                self._redis_up,
                mode="livemin",  # under --workers: 0 when any worker finds it down
            )

    def _redis_up(self) -> float:
        limiter_down = bool(getattr(self._limiter, "redis_down", False))
        return 0.0 if limiter_down or self.readiness.redis_ok is False else 1.0

    def bind(self, services: Any, lint_cache: Any = None) -> None:
        """Read values owned by the services (and the request path's lint cache) at scrape
        time (under ``--workers N`` also every ``FEED_INTERVAL_S``, from a task on the
        running loop), and probe the services' database."""
        self.readiness.database = getattr(services, "db", None)
        ledger, limiter = services.ledger, services.limiter
        self._limiter = limiter
        if lint_cache is not None:
            self.metrics.bind(
                lint_cache_hits=lambda: lint_cache.hits,
                lint_cache_misses=lambda: lint_cache.misses,
            )
        self.metrics.bind(
            ledger_queue_depth=(
                (lambda: ledger.queue_depth) if hasattr(ledger, "queue_depth") else None
            ),
            ratelimit_fail_open=(
                (lambda: limiter.fallback_count) if hasattr(limiter, "fallback_count") else None
            ),
            ratelimit_redis_trips=(
                (lambda: limiter.trip_count) if hasattr(limiter, "trip_count") else None
            ),
            ratelimit_reserved=(
                (lambda: limiter.leased_count) if hasattr(limiter, "leased_count") else None
            ),
        )
        if self.metrics.multiprocess_dir is not None and self._feeding is None:
            self._feeding = asyncio.get_running_loop().create_task(
                self.metrics.feed_forever(), name="metrics feed"
            )

    def meter_limiter(self, limiter: RateLimiter) -> RateLimiter:
        return MeteredLimiter(limiter, self.metrics)

    def meter_upstream(self, upstream: Upstream) -> Upstream:
        return MeteredUpstream(upstream, self.metrics)

    async def aclose(self) -> None:
        if self._feeding is not None:
            self._feeding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._feeding
            self._feeding = None
        self.metrics.close()
        await self.readiness.aclose()


def _ops(request: Request) -> Ops:
    ops: Ops = request.app.state.ops
    return ops


async def healthz(request: Request) -> Response:
    """Liveness: answering at all is the check."""
    return Response(b'{"status":"ok"}', media_type="application/json")


async def readyz(request: Request) -> Response:
    """Readiness: 200 unless a fatal check (database, models) fails, then 503 with the
    reasons. A failing non-fatal check (Redis) is listed in ``degraded`` and, for Redis,
    reported as ``"redis": "degraded"`` (``"ok"`` when it answers)."""
    results = await _ops(request).readiness.check()
    ready = all(r.ok or not r.fatal for r in results)
    body: dict[str, Any] = {
        "status": "ready" if ready else "unavailable",
        "checks": {
            r.name: {"ok": r.ok, "ms": round(r.ms, 2), "reason": r.reason} for r in results
        },
        "reasons": [r.reason for r in results if not r.ok and r.fatal],
        "degraded": [r.reason for r in results if not r.ok and not r.fatal],
    }
    for r in results:
        if r.name == "redis":
            body["redis"] = "ok" if r.ok else "degraded"
    return Response(
        orjson.dumps(body), status_code=200 if ready else 503, media_type="application/json"
    )


async def metrics(request: Request) -> Response:
    """Prometheus text exposition: this process's metrics, or under ``--workers N`` every
    worker's, merged."""
    return Response(_ops(request).metrics.render(), media_type=CONTENT_TYPE)


def ops_routes() -> list[Route]:
    """The unauthenticated operational routes."""
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
