"""A tiny, dependency-free Prometheus registry (the gateway's metric set is in ``metrics``).

Counters, gauges and histograms (fixed buckets), with labels, rendered in the Prometheus
text exposition format 0.0.4 (``# HELP`` / ``# TYPE`` lines, escaped label values).
Values that live elsewhere are read at scrape time through callbacks, so the request path
never pays for them.

Example::

    registry = Registry()
    hits = registry.counter("demo_hits_total", "Hits.", ("route",))
    hits.labels("/v1/models").inc()
    registry.render()  # b'# HELP demo_hits_total Hits.\\n# TYPE demo_hits_total counter\\n...'

Scope: one registry per process. Mutations take a lock, so updates from worker threads
are not lost.
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, TypeVar

_log = logging.getLogger("syntic.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

MetricType = Literal["counter", "gauge", "histogram"]
Callback = Callable[[], float | Mapping[tuple[str, ...], float]]

_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

# Seconds; covers a fast local model (ms) to a slow hosted one (a minute).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)


def format_value(value: float) -> str:
    """A sample value as the exposition format spells it (``+Inf``, ``NaN``, ``3``, ``0.25``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_text(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = ",".join(
        f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values, strict=True)
    )
    return "{" + pairs + "}"


class _Metric:
    type: MetricType

    def __init__(self, name: str, help: str, labelnames: Sequence[str]) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        for label in labelnames:
            if not _LABEL_RE.match(label) or label.startswith("__"):
                raise ValueError(f"invalid label name {label!r} on {name}")
        if len(set(labelnames)) != len(labelnames):
            raise ValueError(f"duplicate label name on {name}")
        self.name = name
        self.help = help
        self.labelnames: tuple[str, ...] = tuple(labelnames)
        self._lock = threading.Lock()

    def _key(self, values: tuple[str, ...], kw: Mapping[str, str]) -> tuple[str, ...]:
        if not kw and len(values) == len(self.labelnames):
            return tuple(map(str, values))  # the request path: positional values
        if kw:
            if values:
                raise TypeError("labels(): pass values positionally or by name, not both")
            try:
                values = tuple(str(kw[n]) for n in self.labelnames)
            except KeyError as exc:
                raise ValueError(f"{self.name}: missing label {exc.args[0]!r}") from exc
            if len(kw) != len(self.labelnames):
                unknown = sorted(set(kw) - set(self.labelnames))
                raise ValueError(f"{self.name}: unknown labels {unknown}")
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        return tuple(str(v) for v in values)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {escape_help(self.help)}", f"# TYPE {self.name} {self.type}"]

    def samples(self) -> list[str]:
        raise NotImplementedError


class _Value:
    """One series of a counter or gauge."""

    __slots__ = ("_lock", "_monotonic", "value")

    def __init__(self, lock: threading.Lock, monotonic: bool) -> None:
        self._lock = lock
        self._monotonic = monotonic
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if self._monotonic and amount < 0:
            raise ValueError("counters only go up")
        with self._lock:
            self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        if self._monotonic:
            raise ValueError("counters only go up")
        with self._lock:
            self.value -= amount

    def set(self, value: float) -> None:
        if self._monotonic:
            raise ValueError("counters cannot be set")
        with self._lock:
            self.value = float(value)


class _Scalar(_Metric):
    """Counter or gauge: a value per label set, or a scrape-time callback."""

    def __init__(
        self,
        name: str,
        help: str,
        labelnames: Sequence[str],
        callback: Callback | None,
    ) -> None:
        super().__init__(name, help, labelnames)
        self._series: dict[tuple[str, ...], _Value] = {}
        self._callback = callback
        if not labelnames and callback is None:
            self._series[()] = _Value(self._lock, self.type == "counter")

    def labels(self, *values: str, **kw: str) -> _Value:
        if not kw:  # the request path: positional strings of a series seen before
            found = self._series.get(values)
            if found is not None:
                return found
        key = self._key(values, kw)
        series = self._series.get(key)
        if series is None:
            with self._lock:
                series = self._series.setdefault(key, _Value(self._lock, self.type == "counter"))
        return series

    def inc(self, amount: float = 1.0) -> None:
        (self._series.get(()) or self.labels()).inc(amount)

    def set_callback(self, callback: Callback | None) -> None:
        """Read the value(s) at scrape time: a float, or ``{label values: float}``."""
        self._callback = callback

    def _current(self) -> list[tuple[tuple[str, ...], float]]:
        if self._callback is not None:
            got = self._callback()
            if isinstance(got, Mapping):
                return sorted((tuple(k), float(v)) for k, v in got.items())
            return [((), float(got))]
        with self._lock:
            return sorted((k, s.value) for k, s in self._series.items())

    def value(self, *values: str) -> float:
        """The current value of one series (0 if never touched); for tests and dashboards."""
        for key, v in self._current():
            if key == tuple(values):
                return v
        return 0.0

    def samples(self) -> list[str]:
        return [
            f"{self.name}{_label_text(self.labelnames, key)} {format_value(v)}"
            for key, v in self._current()
        ]


class Counter(_Scalar):
    type: MetricType = "counter"


class Gauge(_Scalar):
    type: MetricType = "gauge"

    def set(self, value: float) -> None:
        (self._series.get(()) or self.labels()).set(value)

    def dec(self, amount: float = 1.0) -> None:
        (self._series.get(()) or self.labels()).dec(amount)


class _HistogramSeries:
    __slots__ = ("_bounds", "_lock", "count", "counts", "sum")

    def __init__(self, lock: threading.Lock, bounds: tuple[float, ...]) -> None:
        self._lock = lock
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # last slot: above every finite bound
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self.counts[i] += 1
            self.sum += value
            self.count += 1


class Histogram(_Metric):
    type: MetricType = "histogram"

    def __init__(
        self, name: str, help: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        if "le" in labelnames:
            raise ValueError("'le' is reserved on histograms")
        super().__init__(name, help, labelnames)
        bounds = tuple(sorted(float(b) for b in buckets if not math.isinf(b)))
        if not bounds or len(set(bounds)) != len(bounds):
            raise ValueError(f"{name}: buckets must be distinct and non-empty")
        self.buckets = bounds
        self._series: dict[tuple[str, ...], _HistogramSeries] = {}

    def labels(self, *values: str, **kw: str) -> _HistogramSeries:
        if not kw:  # as ``_Scalar.labels``
            found = self._series.get(values)
            if found is not None:
                return found
        key = self._key(values, kw)
        series = self._series.get(key)
        if series is None:
            with self._lock:
                series = self._series.setdefault(key, _HistogramSeries(self._lock, self.buckets))
        return series

    def observe(self, value: float) -> None:
        self.labels().observe(value)

    def samples(self) -> list[str]:
        names = (*self.labelnames, "le")
        out: list[str] = []
        with self._lock:
            snapshot = sorted(
                (k, list(s.counts), s.sum, s.count) for k, s in self._series.items()
            )
        for key, counts, total, count in snapshot:
            running = 0
            for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
                running += n
                le = "+Inf" if math.isinf(bound) else repr(bound)  # "1.0", as Prometheus does
                labels = _label_text(names, (*key, le))
                out.append(f"{self.name}_bucket{labels} {running}")
            plain = _label_text(self.labelnames, key)
            out.append(f"{self.name}_sum{plain} {format_value(total)}")
            out.append(f"{self.name}_count{plain} {count}")
        return out


_M = TypeVar("_M", bound=_Metric)


class Registry:
    """Named metrics of one process, rendered together."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._lock = threading.Lock()

    def _add(self, metric: _M) -> _M:
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f"metric {metric.name} already registered")
            self._metrics[metric.name] = metric
        return metric

    def counter(
        self,
        name: str,
        help: str,
        labelnames: Sequence[str] = (),
        *,
        callback: Callback | None = None,
    ) -> Counter:
        return self._add(Counter(name, help, labelnames, callback))

    def gauge(
        self,
        name: str,
        help: str,
        labelnames: Sequence[str] = (),
        *,
        callback: Callback | None = None,
    ) -> Gauge:
        return self._add(Gauge(name, help, labelnames, callback))

    def histogram(
        self,
        name: str,
        help: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        return self._add(Histogram(name, help, labelnames, buckets))

    def get(self, name: str) -> _Metric | None:
        return self._metrics.get(name)

    def names(self) -> Iterable[str]:
        return tuple(self._metrics)

    def render(self) -> bytes:
        """Every metric in the text exposition format 0.0.4."""
        lines: list[str] = []
        for metric in list(self._metrics.values()):
            try:
                samples = metric.samples()
            except Exception:  # a broken scrape-time callback must not break /metrics
                _log.exception("metric %s: collection failed; series omitted", metric.name)
                samples = []
            lines.extend(metric.header())
            lines.extend(samples)
        return ("\n".join(lines) + "\n").encode()
