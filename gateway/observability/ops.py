"""Operating the gateway: the metric registry, the readiness probe, the request observer.

``Ops`` is built once by ``create_app``; its routes (``/healthz``, ``/readyz``,
``/metrics``) are in ``gateway.routes.health``.

Wiring (in ``create_app``)::

    ops = Ops(settings, metrics, route_paths=metric_paths())  # gateway.routes.table
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
from typing import Any

from gateway.observability.metrics import GatewayMetrics
from gateway.observability.observer import (
    MeteredLimiter,
    MeteredUpstream,
    RequestObserver,
)
from gateway.observability.readiness import Readiness
from gateway.ratelimit.base import RateLimiter
from gateway.settings import Settings
from gateway.upstream.base import Upstream


class Ops:
    """The operational side of one app: metrics, readiness, the request observer."""

    def __init__(
        self,
        settings: Settings,
        metrics: GatewayMetrics | None = None,
        *,
        route_paths: frozenset[str] = frozenset(),
    ) -> None:
        self.settings = settings
        self.metrics = metrics or GatewayMetrics.create()
        self.readiness = Readiness(settings)
        # route_paths: the paths with a label of their own (gateway.routes.table)
        self.observer = RequestObserver(self.metrics, route_paths)
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

    def bind(self, services: Any, lint_cache: Any = None, offload: Any = None) -> None:
        """Read values owned by the services (and the request path's lint cache) at scrape
        time (under ``--workers N`` also every ``FEED_INTERVAL_S``, from a task on the
        running loop), and probe the services' database."""
        self.readiness.database = getattr(services, "db", None)
        ledger, limiter = services.ledger, services.limiter
        self._limiter = limiter
        if offload is not None:
            self.metrics.bind(
                body_offloaded=lambda: offload.offloaded,
                body_workers_busy=lambda: offload.busy,
                body_workers_waiting=lambda: offload.waiting,
            )
        if lint_cache is not None:
            self.metrics.bind(
                lint_cache_hits=lambda: lint_cache.hits,
                lint_cache_misses=lambda: lint_cache.misses,
            )
        self.metrics.bind(
            ledger_queue_depth=(
                (lambda: ledger.queue_depth) if hasattr(ledger, "queue_depth") else None
            ),
            ledger_held_rows=(lambda: ledger.held) if hasattr(ledger, "held") else None,
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
