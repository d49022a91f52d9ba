"""The request path's series as prometheus_client metrics. Under ``syntic serve --workers N``
every update goes at once into the worker's shared value files, so a scrape answered by
any worker counts every request, and a worker killed mid-run keeps what it counted.

Example::

    direct = Direct(registry)
    direct.count_request("/v1/chat/completions", 200, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Histogram

from gateway.observability.series import (
    INFLIGHT_REFUSED,
    LATENCY_BUCKETS,
    RATELIMIT_DECISIONS,
    REQUESTS,
    SCHEMA_CORRECTIONS,
    TOOL_ARGUMENTS_INVALID,
    UPSTREAM_CALLS,
    UPSTREAM_LATENCY,
    UPSTREAM_RETRIES,
    Series,
)

_M = TypeVar("_M", Counter, Histogram)


def _counter(series: Series, registry: CollectorRegistry) -> Counter:
    return Counter(series.name, series.help, series.labels, registry=registry)


class Direct:
    """Every request-path series (``series.RequestPathMetrics``) on prometheus_client."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = _counter(REQUESTS, registry)
        self.upstream_latency = Histogram(
            UPSTREAM_LATENCY.name,
            UPSTREAM_LATENCY.help,
            UPSTREAM_LATENCY.labels,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_calls = _counter(UPSTREAM_CALLS, registry)
        self.upstream_retries = _counter(UPSTREAM_RETRIES, registry)
        self.inflight_refused = _counter(INFLIGHT_REFUSED, registry)
        self.schema_corrections = _counter(SCHEMA_CORRECTIONS, registry)
        self.tool_arguments_invalid = _counter(TOOL_ARGUMENTS_INVALID, registry)
        self.ratelimit_decisions = _counter(RATELIMIT_DECISIONS, registry)
        # Labelled children by label values, resolved once: ``labels()`` costs more per call.
        self._requests: dict[tuple[str, int, str | None], Counter] = {}
        self._children: dict[tuple[object, ...], Any] = {}

    def count_request(self, route: str, status: int, code: str | None) -> None:
        key = (route, status, code)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self.requests.labels(route, str(status), code or "")
        child.inc()
        if status == 422:
            self._child(self.tool_arguments_invalid, code or "").inc()

    def observe_upstream(self, model: str, seconds: float) -> None:
        self._child(self.upstream_latency, model).observe(seconds)

    def count_upstream_calls(
        self, model: str, first: int, corrections: int, retried: Mapping[str, int] | None
    ) -> None:
        if first:
            self._child(self.upstream_calls, model, "first").inc(first)
        if corrections:
            self._child(self.upstream_calls, model, "correction").inc(corrections)
            self.schema_corrections.inc(corrections)
        if retried:
            for reason, n in retried.items():
                self._child(self.upstream_calls, model, "retry").inc(n)
                self._child(self.upstream_retries, model, reason).inc(n)

    def count_rate_decision(self, allowed: bool) -> None:
        self._child(self.ratelimit_decisions, "allowed" if allowed else "limited").inc()

    def count_inflight_refused(self) -> None:
        self.inflight_refused.inc()

    def _child(self, metric: _M, *values: str) -> _M:
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return cast(_M, child)
