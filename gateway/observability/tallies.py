"""The request path's series in one process: plain counts under one lock, turned into
metric families by prometheus_client's ``Collector`` interface when ``/metrics`` is
scraped.

prometheus_client's own ``Counter`` and ``Histogram`` take a lock per value and walk the
buckets in Python on every observation; a request updates four to six values, which
costs more than the rest of the metrics work together. Here an update is a dict
increment, and a scrape prints exactly what those metrics would print (the same names,
HELP texts, labels, sample order and number formatting). Under ``--workers`` the values
must live in prometheus_client's shared files instead (``direct``).

Example::

    tallies = Tallies()
    registry.register(tallies)
    tallies.count_request("/v1/chat/completions", 200, None)
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

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

_LE = (*(floatToGoString(b) for b in LATENCY_BUCKETS), "+Inf")  # type: ignore[no-untyped-call]


class Tallies(Collector):
    """Every request-path series of one process (``series.RequestPathMetrics``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # updates may come from any thread
        self._requests: dict[tuple[str, int, str | None], int] = {}
        self._invalid: dict[str, int] = {}
        # model -> one count per bucket (``+Inf`` last), then the sum of the observations
        self._latency: dict[str, list[float]] = {}
        self._calls: dict[tuple[str, str], int] = {}
        self._retries: dict[tuple[str, str], int] = {}
        self._decisions: dict[str, int] = {}
        self._corrections = 0
        self._refused = 0

    # -- the request path ---------------------------------------------------------------
    def count_request(self, route: str, status: int, code: str | None) -> None:
        key = (route, status, code)
        with self._lock:
            counts = self._requests
            counts[key] = counts.get(key, 0) + 1
            if status == 422:
                label = code or ""
                self._invalid[label] = self._invalid.get(label, 0) + 1

    def observe_upstream(self, model: str, seconds: float) -> None:
        slot = bisect_left(LATENCY_BUCKETS, seconds)  # the first bound >= seconds (``le``)
        with self._lock:
            row = self._latency.get(model)
            if row is None:
                row = self._latency[model] = [0.0] * (len(_LE) + 1)
            row[slot] += 1
            row[-1] += seconds

    def count_upstream_calls(
        self, model: str, first: int, corrections: int, retried: Mapping[str, int] | None
    ) -> None:
        with self._lock:
            calls = self._calls
            if first:
                key = (model, "first")
                calls[key] = calls.get(key, 0) + first
            if corrections:
                key = (model, "correction")
                calls[key] = calls.get(key, 0) + corrections
                self._corrections += corrections
            if retried:
                for reason, n in retried.items():
                    key = (model, "retry")
                    calls[key] = calls.get(key, 0) + n
                    key = (model, reason)
                    self._retries[key] = self._retries.get(key, 0) + n

    def count_rate_decision(self, allowed: bool) -> None:
        label = "allowed" if allowed else "limited"
        with self._lock:
            self._decisions[label] = self._decisions.get(label, 0) + 1

    def count_inflight_refused(self) -> None:
        with self._lock:
            self._refused += 1

    # -- a scrape -------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        with self._lock:
            requests: dict[tuple[str, str, str], int] = {}
            for (route, status, code), n in self._requests.items():
                labels = (route, str(status), code or "")  # None and "" are one series
                requests[labels] = requests.get(labels, 0) + n
            latency = {model: list(row) for model, row in self._latency.items()}
            calls, retries = dict(self._calls), dict(self._retries)
            invalid, decisions = dict(self._invalid), dict(self._decisions)
            corrections, refused = self._corrections, self._refused
        yield _counter(REQUESTS, requests.items())
        histogram = HistogramMetricFamily(
            UPSTREAM_LATENCY.name, UPSTREAM_LATENCY.help, labels=UPSTREAM_LATENCY.labels
        )
        for model, row in latency.items():
            running, buckets = 0.0, []
            for le, count in zip(_LE, row, strict=False):  # the sum, last in row, is skipped
                running += count
                buckets.append((le, running))
            histogram.add_metric((model,), buckets, row[-1])
        yield histogram
        yield _counter(UPSTREAM_CALLS, calls.items())
        yield _counter(UPSTREAM_RETRIES, retries.items())
        yield _counter(INFLIGHT_REFUSED, [((), refused)])
        yield _counter(SCHEMA_CORRECTIONS, [((), corrections)])
        yield _counter(TOOL_ARGUMENTS_INVALID, (((c,), n) for c, n in invalid.items()))
        yield _counter(RATELIMIT_DECISIONS, (((d,), n) for d, n in decisions.items()))

def _counter(series: Series, values: Iterable[tuple[Sequence[str], int]]) -> CounterMetricFamily:
    family = CounterMetricFamily(series.name, series.help, labels=series.labels)
    for label_values, n in values:
        family.add_metric(label_values, n)
    return family
