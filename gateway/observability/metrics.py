"""The gateway's Prometheus metrics (served at ``GET /metrics``), on ``prometheus_client``.

One ``GatewayMetrics`` per process, built by ``create_app`` and passed down. Two modes:

- one process (``multiprocess_dir=None``): the metrics live on a private
  ``CollectorRegistry`` and a scrape renders it.
- ``syntic serve --workers N``: prometheus_client's multiprocess mode. Every worker writes
  its values to files in ``multiprocess_dir`` (``PROMETHEUS_MULTIPROC_DIR``, set by
  ``syntic serve`` before the workers start) and a scrape answered by any worker renders
  them all merged: counters and histograms summed, gauges summed (or, for
  ``syntic_redis_up``, the minimum) over the live workers. See ``multiprocess``.

Values owned by other components (the validator's schema cache, the ledger's queue, the
rate limiter's and the lint cache's counters, the request observer's in-flight count) are
*fed*: read and copied into their metric before each scrape, and in multiprocess mode
every ``FEED_INTERVAL_S`` too, so a scrape answered by another worker shows them at most
that old. The request path's own series are prometheus_client metrics (``direct``; under
``--workers`` in the shared files at once); ``GatewayMetrics.path`` holds them.

Example::

    metrics = GatewayMetrics.create()
    metrics.count_request("/v1/chat/completions", 200, None)
    metrics.observe_upstream("amara-s1.2", 0.42)
    metrics.render()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.observability import multiprocess
from gateway.observability.direct import Direct
from gateway.observability.series import LATENCY_BUCKETS, RequestPathMetrics

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS", "CacheStatsLike", "GatewayMetrics"]

_log = logging.getLogger("syntic.metrics")

CONTENT_TYPE: str = CONTENT_TYPE_PLAIN_0_0_4  # what generate_latest writes

# How stale another worker's fed values may be in a scrape under --workers N.
FEED_INTERVAL_S = 1.0

GaugeMode = Literal["livesum", "livemin"]
Read = Callable[[], float]


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


class _CounterFeed:
    """A total kept by another component: each pull adds what it grew by since the last."""

    __slots__ = ("counter", "read", "seen")

    def __init__(self, counter: Counter, read: Read | None) -> None:
        self.counter = counter
        self.read = read
        self.seen = 0.0

    def rebind(self, read: Read) -> None:
        self.read, self.seen = read, 0.0

    def pull(self) -> None:
        if self.read is None:
            return
        value = float(self.read())
        if value > self.seen:
            self.counter.inc(value - self.seen)
        self.seen = value  # lower: the source restarted; count its growth from here


class _GaugeFeed:
    """A level kept by another component, copied on each pull."""

    __slots__ = ("gauge", "read")

    def __init__(self, gauge: Gauge, read: Read | None) -> None:
        self.gauge = gauge
        self.read = read

    def rebind(self, read: Read) -> None:
        self.read = read

    def pull(self) -> None:
        if self.read is not None:
            self.gauge.set(float(self.read()))


_Feed = _CounterFeed | _GaugeFeed


@dataclass(frozen=True, slots=True)
class GatewayMetrics:
    """Every series the gateway exports. ``multiprocess_dir`` set: multiprocess mode."""

    registry: CollectorRegistry
    multiprocess_dir: str | None
    path: RequestPathMetrics  # the request path's series (module docstring)
    _feeds: dict[str, _Feed] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        cache_stats: CacheStatsFn | None = None,
        *,
        multiprocess_dir: str | None = None,
    ) -> GatewayMetrics:
        """A fresh registry with every gateway metric. ``cache_stats`` defaults to
        ``validator.cache_stats``; ``multiprocess_dir`` is ``PROMETHEUS_MULTIPROC_DIR``
        of a multi-worker server (prometheus_client reads that variable at import)."""
        # No ``*_created`` series: the exposition keeps the samples it always had.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        stats = cache_stats or _validator_cache_stats
        r = CollectorRegistry(auto_describe=False)
        path: RequestPathMetrics = Direct(r)
        m = cls(registry=r, multiprocess_dir=multiprocess_dir, path=path)
        m.fed_counter(
            "syntic_ratelimit_fail_open_total",
            "Rate limit checks decided locally because Redis was unreachable.",
        )
        m.fed_counter(
            "syntic_ratelimit_redis_trips_total", "Rate limit check scripts sent to Redis."
        )
        m.fed_counter(
            "syntic_ratelimit_reserved_total",
            "Requests admitted from slots this process reserved in Redis (no round trip).",
        )
        m.fed_gauge(
            "syntic_ledger_queue_depth", "Usage records waiting to be written to the database."
        )
        m.fed_gauge(
            "syntic_ledger_held_rows",
            "Usage records in memory only: neither the spool nor the database took "
            "them yet (past ledger_max_held_rows: 503 ledger_unavailable).",
        )
        # Counted by the request observer in a plain int: two gauge updates per request
        # cost more than reading it at scrape time.
        m.fed_gauge("syntic_inflight_requests", "Requests being served right now by this process.")
        m.fed_counter(
            "syntic_body_offloaded_total",
            "Jobs on large request bodies (and stored conversations) run off the "
            "event loop: bounds checked in a child process, parsing, decoding "
            "and re-encoding in a worker thread.",
        )
        m.fed_gauge(
            "syntic_body_workers_busy",
            "Body workers running a job now (at most body_offload_workers).",
        )
        m.fed_gauge(
            "syntic_body_workers_waiting", "Large bodies waiting for a free body worker now."
        )
        m.fed_counter(
            "syntic_schema_cache_hits_total", "Compiled-schema cache hits.", lambda: stats().hits
        )
        m.fed_counter(
            "syntic_schema_cache_misses_total",
            "Compiled-schema cache misses (a schema compiled).",
            lambda: stats().misses,
        )
        m.fed_counter(
            "syntic_schema_cache_evictions_total",
            "Compiled schemas evicted from the cache.",
            lambda: stats().evictions,
        )
        m.fed_gauge(
            "syntic_schema_cache_size",
            "Compiled schemas held in this process's cache.",
            lambda: stats().size,
        )
        m.fed_gauge(
            "syntic_schema_cache_bytes",
            "Canonical JSON bytes of the compiled schemas in this process's cache (its "
            "second bound; the compiled forms take ~10-20x this in memory).",
            lambda: stats().bytes,
        )
        m.fed_counter(
            "syntic_lint_cache_hits_total",
            "Request-path schema verdicts (lint + compiled schema) found in the "
            "gateway's cache: a repeated schema costs one hash.",
        )
        m.fed_counter(
            "syntic_lint_cache_misses_total",
            "Request-path schema verdicts computed (lint, then compile via the "
            "compiled-schema cache).",
        )
        return m

    # -- values owned elsewhere ---------------------------------------------------------
    def fed_counter(self, name: str, help: str, read: Read | None = None) -> None:
        """A counter whose total another component keeps (``read`` returns it)."""
        self._feeds[name] = _CounterFeed(Counter(name, help, registry=self.registry), read)

    def fed_gauge(
        self, name: str, help: str, read: Read | None = None, mode: GaugeMode = "livesum"
    ) -> None:
        """A gauge whose level another component keeps; ``mode`` merges it across workers."""
        gauge = Gauge(name, help, registry=self.registry, multiprocess_mode=mode)
        self._feeds[name] = _GaugeFeed(gauge, read)

    def bind(
        self,
        *,
        inflight: Read | None = None,
        ledger_queue_depth: Read | None = None,
        ledger_held_rows: Read | None = None,
        ratelimit_fail_open: Read | None = None,
        ratelimit_redis_trips: Read | None = None,
        ratelimit_reserved: Read | None = None,
        lint_cache_hits: Read | None = None,
        lint_cache_misses: Read | None = None,
        body_offloaded: Read | None = None,
        body_workers_busy: Read | None = None,
        body_workers_waiting: Read | None = None,
    ) -> None:
        """Read values owned by other components before each scrape."""
        reads = {
            "syntic_inflight_requests": inflight,
            "syntic_ledger_queue_depth": ledger_queue_depth,
            "syntic_ledger_held_rows": ledger_held_rows,
            "syntic_ratelimit_fail_open_total": ratelimit_fail_open,
            "syntic_ratelimit_redis_trips_total": ratelimit_redis_trips,
            "syntic_ratelimit_reserved_total": ratelimit_reserved,
            "syntic_lint_cache_hits_total": lint_cache_hits,
            "syntic_lint_cache_misses_total": lint_cache_misses,
            "syntic_body_offloaded_total": body_offloaded,
            "syntic_body_workers_busy": body_workers_busy,
            "syntic_body_workers_waiting": body_workers_waiting,
        }
        for name, read in reads.items():
            if read is not None:
                self._feeds[name].rebind(read)

    def pull(self) -> None:
        """Copy every fed value into its metric. A failing source keeps its last value
        and does not stop the others."""
        for name, feed in self._feeds.items():
            try:
                feed.pull()
            except Exception:  # a broken source must not break /metrics
                _log.exception("metric %s: reading its source failed; value kept", name)

    async def feed_forever(self) -> None:
        """Multiprocess mode: keep this worker's fed values fresh for scrapes that
        another worker answers, and drop the live gauges of workers that died."""
        assert self.multiprocess_dir is not None
        while True:
            await asyncio.sleep(FEED_INTERVAL_S)
            self.pull()
            try:
                multiprocess.forget_dead_workers(self.multiprocess_dir)
            except OSError:  # keep feeding; the next round tries again
                _log.exception("metrics: dropping dead workers' gauges failed")

    def close(self) -> None:
        """This process stops serving: in multiprocess mode its totals are written out one
        last time and its live gauges leave the merge."""
        if self.multiprocess_dir is not None:
            self.pull()
            multiprocess.worker_exited(self.multiprocess_dir)

    def render(self) -> bytes:
        """Every metric in the text exposition format 0.0.4 (all workers in multiprocess
        mode)."""
        self.pull()
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        merged = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(merged, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return generate_latest(merged)

    # -- the request path (``path``, through these for callers that hold the metrics) --
    def count_request(self, route: str, status: int, code: str | None) -> None:
        """One finished HTTP request. ``route`` is the route template, never a raw path."""
        self.path.count_request(route, status, code)

    def observe_upstream(self, model: str, seconds: float) -> None:
        """One upstream call's duration."""
        self.path.observe_upstream(model, seconds)

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
        self.path.count_upstream_calls(model, first, corrections, retried)

    def count_rate_decision(self, allowed: bool) -> None:
        self.path.count_rate_decision(allowed)
