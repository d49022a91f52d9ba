"""The gateway's Prometheus metrics (served at ``GET /metrics``).

One ``GatewayMetrics`` per process, built by ``create_app`` and passed down. Request-path
updates are a dict lookup and a locked add; values owned by other components (the
validator's schema cache, the ledger's queue, the rate limiter's fallback counter) are read
at scrape time through callbacks.

``syntic serve --workers N`` runs N processes, each with its own registry: a scrape sees one
worker. Sum across workers and replicas in Prometheus (``sum by (route) (...)``); for exact
per-process figures run one worker per container and scale with replicas.

Example::

    metrics = GatewayMetrics.create()
    metrics.count_request("/v1/chat/completions", 200, None)
    metrics.observe_upstream("amara-s1.2", 0.42)
    metrics.registry.render()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from gateway.observability.registry import (
    CONTENT_TYPE,
    LATENCY_BUCKETS,
    Counter,
    Gauge,
    Histogram,
    Registry,
)

__all__ = ["CONTENT_TYPE", "CacheStatsLike", "GatewayMetrics", "Registry"]


class CacheStatsLike(Protocol):
    """What ``validator.cache_stats()`` returns (read at scrape time)."""

    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def evictions(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def bytes(self) -> int: ...


CacheStatsFn = Callable[[], CacheStatsLike]


def _validator_cache_stats() -> CacheStatsLike:
    # Imported at scrape time: the gateway depends on the validator, never the reverse.
    import validator

    stats: CacheStatsLike = validator.cache_stats()
    return stats


@dataclass(frozen=True, slots=True)
class GatewayMetrics:
    """Every series the gateway exports, on one registry."""

    registry: Registry
    requests: Counter
    upstream_latency: Histogram
    upstream_calls: Counter
    upstream_retries: Counter
    inflight_refused: Counter
    schema_corrections: Counter
    tool_arguments_invalid: Counter
    ratelimit_decisions: Counter
    ratelimit_fail_open: Counter
    ratelimit_redis_trips: Counter
    ratelimit_reserved: Counter
    ledger_queue_depth: Gauge
    inflight: Gauge
    schema_cache_hits: Counter
    schema_cache_misses: Counter
    schema_cache_evictions: Counter
    schema_cache_size: Gauge
    schema_cache_bytes: Gauge
    lint_cache_hits: Counter
    lint_cache_misses: Counter

    @classmethod
    def create(cls, cache_stats: CacheStatsFn | None = None) -> GatewayMetrics:
        """A fresh registry with every gateway metric. ``cache_stats`` defaults to
        ``validator.cache_stats``."""
        stats = cache_stats or _validator_cache_stats
        r = Registry()
        return cls(
            registry=r,
            requests=r.counter(
                "syntic_requests_total",
                "HTTP requests by route template, status and error code ('' on success).",
                ("route", "status", "code"),
            ),
            upstream_latency=r.histogram(
                "syntic_upstream_latency_seconds",
                "Duration of one upstream model call (streams: until the last event).",
                ("model",),
                buckets=LATENCY_BUCKETS,
            ),
            upstream_calls=r.counter(
                "syntic_upstream_calls_total",
                "Upstream model calls (attempts): kind=first, correction (schema "
                "correction calls) or retry (attempts that failed safely and were retried).",
                ("model", "kind"),
            ),
            upstream_retries=r.counter(
                "syntic_upstream_retries_total",
                "Upstream attempts retried after a safe failure; reason=connect or the "
                "upstream status (429, 502, 503, 529).",
                ("model", "reason"),
            ),
            inflight_refused=r.counter(
                "syntic_inflight_refused_total",
                "Requests refused with 503 overloaded: max_inflight already in flight.",
            ),
            schema_corrections=r.counter(
                "syntic_schema_corrections_total",
                "Correction calls made because strict tool arguments or JSON output "
                "did not match the schema.",
            ),
            tool_arguments_invalid=r.counter(
                "syntic_tool_arguments_invalid_total",
                "422 responses: output still invalid after one correction.",
                ("code",),
            ),
            ratelimit_decisions=r.counter(
                "syntic_ratelimit_decisions_total",
                "Rate limit checks by decision (allowed|limited).",
                ("decision",),
            ),
            ratelimit_fail_open=r.counter(
                "syntic_ratelimit_fail_open_total",
                "Rate limit checks decided locally because Redis was unreachable.",
            ),
            ratelimit_redis_trips=r.counter(
                "syntic_ratelimit_redis_trips_total",
                "Rate limit check scripts sent to Redis.",
            ),
            ratelimit_reserved=r.counter(
                "syntic_ratelimit_reserved_total",
                "Requests admitted from slots this process reserved in Redis (no round trip).",
            ),
            ledger_queue_depth=r.gauge(
                "syntic_ledger_queue_depth",
                "Usage records waiting to be written to the database.",
            ),
            inflight=r.gauge(
                "syntic_inflight_requests",
                "Requests being served right now by this process.",
            ),
            schema_cache_hits=r.counter(
                "syntic_schema_cache_hits_total",
                "Compiled-schema cache hits.",
                callback=lambda: stats().hits,
            ),
            schema_cache_misses=r.counter(
                "syntic_schema_cache_misses_total",
                "Compiled-schema cache misses (a schema compiled).",
                callback=lambda: stats().misses,
            ),
            schema_cache_evictions=r.counter(
                "syntic_schema_cache_evictions_total",
                "Compiled schemas evicted from the cache.",
                callback=lambda: stats().evictions,
            ),
            schema_cache_size=r.gauge(
                "syntic_schema_cache_size",
                "Compiled schemas held in this process's cache.",
                callback=lambda: stats().size,
            ),
            schema_cache_bytes=r.gauge(
                "syntic_schema_cache_bytes",
                "Canonical JSON bytes of the compiled schemas in this process's cache (its "
                "second bound; the compiled forms take ~10-20x this in memory).",
                callback=lambda: stats().bytes,
            ),
            lint_cache_hits=r.counter(
                "syntic_lint_cache_hits_total",
                "Request-path schema verdicts (lint + compiled schema) found in the "
                "gateway's cache: a repeated schema costs one hash.",
            ),
            lint_cache_misses=r.counter(
                "syntic_lint_cache_misses_total",
                "Request-path schema verdicts computed (lint, then compile via the "
                "compiled-schema cache).",
            ),
        )

    def bind(
        self,
        *,
        ledger_queue_depth: Callable[[], float] | None = None,
        ratelimit_fail_open: Callable[[], float] | None = None,
        ratelimit_redis_trips: Callable[[], float] | None = None,
        ratelimit_reserved: Callable[[], float] | None = None,
        lint_cache_hits: Callable[[], float] | None = None,
        lint_cache_misses: Callable[[], float] | None = None,
    ) -> None:
        """Read values owned by other components at scrape time."""
        if lint_cache_hits is not None:
            self.lint_cache_hits.set_callback(lint_cache_hits)
        if lint_cache_misses is not None:
            self.lint_cache_misses.set_callback(lint_cache_misses)
        if ledger_queue_depth is not None:
            self.ledger_queue_depth.set_callback(ledger_queue_depth)
        if ratelimit_fail_open is not None:
            self.ratelimit_fail_open.set_callback(ratelimit_fail_open)
        if ratelimit_redis_trips is not None:
            self.ratelimit_redis_trips.set_callback(ratelimit_redis_trips)
        if ratelimit_reserved is not None:
            self.ratelimit_reserved.set_callback(ratelimit_reserved)

    def count_request(self, route: str, status: int, code: str | None) -> None:
        """One finished HTTP request. ``route`` is the route template, never a raw path."""
        self.requests.labels(route, str(status), code or "").inc()
        if status == 422:
            self.tool_arguments_invalid.labels(code or "").inc()

    def observe_upstream(self, model: str, seconds: float) -> None:
        """One upstream call's duration."""
        self.upstream_latency.labels(model).observe(seconds)

    def count_upstream_calls(
        self,
        model: str,
        first: int,
        corrections: int,
        retried: Mapping[str, int] | None = None,
    ) -> None:
        """Upstream calls of one finished request (from its tally): ``first`` and
        ``corrections`` are final attempts, ``retried`` maps a retry reason to the number
        of attempts retried for it."""
        if first:
            self.upstream_calls.labels(model, "first").inc(first)
        if corrections:
            self.upstream_calls.labels(model, "correction").inc(corrections)
            self.schema_corrections.inc(corrections)
        if retried:
            for reason, n in retried.items():
                self.upstream_calls.labels(model, "retry").inc(n)
                self.upstream_retries.labels(model, reason).inc(n)

    def count_rate_decision(self, allowed: bool) -> None:
        self.ratelimit_decisions.labels("allowed" if allowed else "limited").inc()
