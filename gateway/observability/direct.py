"""The request path's series as prometheus_client metrics. Under ``syntic serve --workers N``
every update goes at once into the worker's shared value files, so a scrape answered by
any worker counts every request, and a worker killed mid-run keeps what it counted.

Example::

    direct = Direct(registry)
    direct.count_request("/v1/chat/completions", 200, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

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


class _Children(dict[Any, _M]):
    """A labelled metric's children by their label values (a tuple of them, or a single
    label's value), each made by ``labels()`` on its first use: after that, finding one
    is a dict lookup (``labels()`` checks, builds a tuple and takes a lock every call)."""

    def __init__(self, metric: _M) -> None:
        super().__init__()
        self.metric: _M = metric

    def __missing__(self, values: str | tuple[str, ...]) -> _M:
        labels = values if isinstance(values, tuple) else (values,)
        child: _M = self.metric.labels(*labels)
        self[values] = child
        return child


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
        self._latency = _Children(self.upstream_latency)
        self._calls = _Children(self.upstream_calls)
        self._retries = _Children(self.upstream_retries)
        self._invalid = _Children(self.tool_arguments_invalid)
        self._decisions = _Children(self.ratelimit_decisions)

    def count_request(self, route: str, status: int, code: str | None) -> None:
        key = (route, status, code)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self.requests.labels(route, str(status), code or "")
        child.inc()
        if status == 422:
            self._invalid[code or ""].inc()

    def observe_upstream(self, model: str, seconds: float) -> None:
        self._latency[model].observe(seconds)

    def count_upstream_calls(
        self, model: str, first: int, corrections: int, retried: Mapping[str, int] | None
    ) -> None:
        if first:
            self._calls[model, "first"].inc(first)
        if corrections:
            self._calls[model, "correction"].inc(corrections)
            self.schema_corrections.inc(corrections)
        if retried:
            for reason, n in retried.items():
                self._calls[model, "retry"].inc(n)
                self._retries[model, reason].inc(n)

    def count_rate_decision(self, allowed: bool) -> None:
        self._decisions["allowed" if allowed else "limited"].inc()

    def count_inflight_refused(self) -> None:
        self.inflight_refused.inc()
