"""The Prometheus registry: exposition text parsed back by an independent parser."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.observability.metrics import GatewayMetrics
from gateway.observability.registry import Registry, escape_label_value, format_value


def _families(registry: Registry) -> dict[str, object]:
    text = registry.render().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _samples(registry: Registry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(registry.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_counter_with_labels_round_trips() -> None:
    r = Registry()
    c = r.counter("demo_requests_total", "Requests.", ("route", "status"))
    c.labels("/a", "200").inc()
    c.labels("/a", "200").inc(2)
    c.labels(route="/b", status="500").inc()
    samples = _samples(r)
    assert samples[("demo_requests_total", (("route", "/a"), ("status", "200")))] == 3
    assert samples[("demo_requests_total", (("route", "/b"), ("status", "500")))] == 1
    assert c.value("/a", "200") == 3
    assert c.value("/never", "x") == 0


@pytest.mark.parametrize(
    "raw",
    ['plain', 'quote"inside', "back\\slash", "new\nline", 'all "\\\n three', "ünïcode", ""],
)
def test_label_values_are_escaped(raw: str) -> None:
    r = Registry()
    r.counter("demo_total", "Demo.", ("v",)).labels(raw).inc()
    (family,) = text_string_to_metric_families(r.render().decode())
    (sample,) = family.samples
    assert sample.labels == {"v": raw}


def test_help_text_escaped_and_types_declared() -> None:
    r = Registry()
    r.gauge("demo_gauge", "Line one\nline two \\ end.").set(1.5)
    text = r.render().decode()
    assert "# HELP demo_gauge Line one\\nline two \\\\ end.\n" in text
    assert "# TYPE demo_gauge gauge\n" in text
    (family,) = text_string_to_metric_families(text)
    assert family.documentation == "Line one\nline two \\ end."
    assert family.type == "gauge"


def test_histogram_buckets_are_cumulative_with_sum_and_count() -> None:
    r = Registry()
    h = r.histogram("demo_seconds", "Latency.", ("model",), buckets=(0.1, 1.0, 10.0))
    for v in (0.05, 0.1, 0.5, 2.0, 100.0):
        h.labels("m").observe(v)
    s = _samples(r)

    def bucket(le: str) -> float:
        return s[("demo_seconds_bucket", (("le", le), ("model", "m")))]

    assert [bucket(le) for le in ("0.1", "1.0", "10.0", "+Inf")] == [2, 3, 4, 5]
    assert s[("demo_seconds_count", (("model", "m"),))] == 5
    assert s[("demo_seconds_sum", (("model", "m"),))] == pytest.approx(102.65)
    assert _families(r)["demo_seconds"].type == "histogram"  # type: ignore[attr-defined]


def test_gauge_inc_dec_set_and_callbacks() -> None:
    r = Registry()
    g = r.gauge("demo_inflight", "In flight.")
    g.inc()
    g.inc()
    g.dec()
    assert g.value() == 1
    depth = [7]
    r.gauge("demo_depth", "Depth.", callback=lambda: depth[0])
    r.counter("demo_by_kind_total", "By kind.", ("kind",), callback=lambda: {("a",): 2, ("b",): 3})
    depth[0] = 9  # read at scrape time, not at registration
    s = _samples(r)
    assert s[("demo_depth", ())] == 9
    assert s[("demo_by_kind_total", (("kind", "a"),))] == 2
    assert s[("demo_by_kind_total", (("kind", "b"),))] == 3


def test_failing_callback_omits_series_but_renders_the_rest() -> None:
    r = Registry()

    def boom() -> float:
        raise RuntimeError("backend gone")

    r.gauge("demo_broken", "Broken.", callback=boom)
    r.counter("demo_ok_total", "Fine.").inc()
    s = _samples(r)
    assert s[("demo_ok_total", ())] == 1
    assert not any(name == "demo_broken" for name, _ in s)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda r: r.counter("bad-name", "x"), ValueError),
        (lambda r: r.counter("ok_total", "x", ("__reserved",)), ValueError),
        (lambda r: r.counter("ok_total", "x", ("a", "a")), ValueError),
        (lambda r: r.histogram("ok_seconds", "x", ("le",)), ValueError),
        (lambda r: r.histogram("ok_seconds", "x", buckets=()), ValueError),
        (lambda r: r.counter("ok_total", "x").inc(-1), ValueError),
        (lambda r: r.counter("ok_total", "x", ("a",)).labels("1", "2"), ValueError),
        (lambda r: r.counter("ok_total", "x", ("a",)).labels(b="1"), ValueError),
    ],
)
def test_misuse_is_refused(make: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        make(Registry())  # type: ignore[operator]


def test_duplicate_registration_refused() -> None:
    r = Registry()
    r.counter("x_total", "x")
    with pytest.raises(ValueError):
        r.gauge("x_total", "x")


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (0.25, "0.25"), (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN"),
     (1e20, "1e+20"), (-3.0, "-3")],
)
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


def test_escape_label_value_order() -> None:
    assert escape_label_value('a\\"b\n') == 'a\\\\\\"b\\n'


def test_concurrent_increments_are_not_lost() -> None:
    r = Registry()
    c = r.counter("demo_total", "x", ("k",))
    h = r.histogram("demo_seconds", "x", buckets=(1.0,))

    def work() -> None:
        for _ in range(5000):
            c.labels("k").inc()
            h.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = _samples(r)
    assert s[("demo_total", (("k", "k"),))] == 20000
    assert s[("demo_seconds_count", ())] == 20000


@dataclass(frozen=True, slots=True)
class _Stats:
    hits: int
    misses: int
    evictions: int
    size: int
    bytes: int


def test_gateway_metric_set_exports_every_named_series() -> None:
    stats = _Stats(hits=5, misses=2, evictions=1, size=3, bytes=4096)
    m = GatewayMetrics.create(cache_stats=lambda: stats)
    m.bind(ledger_queue_depth=lambda: 4, ratelimit_fail_open=lambda: 6)
    m.count_request("/v1/chat/completions", 200, None)
    m.count_request("/v1/chat/completions", 422, "tool_arguments_invalid")
    m.observe_upstream("amara", 0.3)
    m.count_upstream_calls("amara", first=1, corrections=1)
    m.count_rate_decision(True)
    m.count_rate_decision(False)
    m.inflight.inc()
    s = _samples(m.registry)
    route = ("route", "/v1/chat/completions")
    assert s[("syntic_requests_total", (("code", ""), route, ("status", "200")))] == 1
    assert s[("syntic_requests_total",
              (("code", "tool_arguments_invalid"), route, ("status", "422")))] == 1
    assert s[("syntic_tool_arguments_invalid_total", (("code", "tool_arguments_invalid"),))] == 1
    assert s[("syntic_upstream_latency_seconds_count", (("model", "amara"),))] == 1
    assert s[("syntic_upstream_calls_total", (("kind", "first"), ("model", "amara")))] == 1
    assert s[("syntic_upstream_calls_total", (("kind", "correction"), ("model", "amara")))] == 1
    assert s[("syntic_schema_corrections_total", ())] == 1
    assert s[("syntic_ratelimit_decisions_total", (("decision", "allowed"),))] == 1
    assert s[("syntic_ratelimit_decisions_total", (("decision", "limited"),))] == 1
    assert s[("syntic_ratelimit_fail_open_total", ())] == 6
    assert s[("syntic_ledger_queue_depth", ())] == 4
    assert s[("syntic_inflight_requests", ())] == 1
    assert s[("syntic_schema_cache_hits_total", ())] == 5
    assert s[("syntic_schema_cache_misses_total", ())] == 2
    assert s[("syntic_schema_cache_evictions_total", ())] == 1
    assert s[("syntic_schema_cache_size", ())] == 3
    assert s[("syntic_schema_cache_bytes", ())] == 4096
