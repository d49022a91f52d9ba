"""The gateway's metric set (one process), read back by prometheus_client's own parser:
the names, types and HELP texts dashboards depend on, values fed from other components,
and updates from several threads."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.observability.metrics import GatewayMetrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass(frozen=True, slots=True)
class _Stats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    size: int = 0
    bytes: int = 0


def _samples(m: GatewayMetrics) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(m.render().decode())
        for s in family.samples
    }


# What dashboards were built on: (family as exposed, type, HELP).
CONTRACT = [
    (
        "syntic_requests_total",
        "counter",
        "HTTP requests by route template, status and error code ('' on success).",
    ),
    (
        "syntic_upstream_latency_seconds",
        "histogram",
        "Duration of one upstream model call (streams: until the last event).",
    ),
    (
        "syntic_upstream_calls_total",
        "counter",
        "Upstream model calls (attempts): kind=first, correction (schema correction calls) or "
        "retry (attempts that failed safely and were retried).",
    ),
    (
        "syntic_upstream_retries_total",
        "counter",
        "Upstream attempts retried after a safe failure; reason=connect or the upstream status "
        "(429, 502, 503, 529).",
    ),
    (
        "syntic_inflight_refused_total",
        "counter",
        "Requests refused with 503 overloaded: max_inflight already in flight.",
    ),
    (
        "syntic_schema_corrections_total",
        "counter",
        "Correction calls made because strict tool arguments or JSON output did not match the "
        "schema.",
    ),
    (
        "syntic_tool_arguments_invalid_total",
        "counter",
        "422 responses: output still invalid after one correction.",
    ),
    (
        "syntic_ratelimit_decisions_total",
        "counter",
        "Rate limit checks by decision (allowed|limited).",
    ),
    (
        "syntic_ratelimit_fail_open_total",
        "counter",
        "Rate limit checks decided locally because Redis was unreachable.",
    ),
    ("syntic_ratelimit_redis_trips_total", "counter", "Rate limit check scripts sent to Redis."),
    (
        "syntic_ratelimit_reserved_total",
        "counter",
        "Requests admitted from slots this process reserved in Redis (no round trip).",
    ),
    ("syntic_ledger_queue_depth", "gauge", "Usage records waiting to be written to the database."),
    (
        "syntic_ledger_held_rows",
        "gauge",
        "Usage records in memory only: neither the spool nor the database took them yet (past "
        "ledger_max_held_rows: 503 ledger_unavailable).",
    ),
    ("syntic_inflight_requests", "gauge", "Requests being served right now by this process."),
    (
        "syntic_body_offloaded_total",
        "counter",
        "Jobs on large request bodies (and stored conversations) run off the event loop: bounds "
        "checked in a child process, parsing, decoding and re-encoding in a worker thread.",
    ),
    (
        "syntic_body_workers_busy",
        "gauge",
        "Body workers running a job now (at most body_offload_workers).",
    ),
    ("syntic_body_workers_waiting", "gauge", "Large bodies waiting for a free body worker now."),
    ("syntic_schema_cache_hits_total", "counter", "Compiled-schema cache hits."),
    (
        "syntic_schema_cache_misses_total",
        "counter",
        "Compiled-schema cache misses (a schema compiled).",
    ),
    ("syntic_schema_cache_evictions_total", "counter", "Compiled schemas evicted from the cache."),
    ("syntic_schema_cache_size", "gauge", "Compiled schemas held in this process's cache."),
    (
        "syntic_schema_cache_bytes",
        "gauge",
        "Canonical JSON bytes of the compiled schemas in this process's cache (its second bound; "
        "the compiled forms take ~10-20x this in memory).",
    ),
    (
        "syntic_lint_cache_hits_total",
        "counter",
        "Request-path schema verdicts (lint + compiled schema) found in the gateway's cache: a "
        "repeated schema costs one hash.",
    ),
    (
        "syntic_lint_cache_misses_total",
        "counter",
        "Request-path schema verdicts computed (lint, then compile via the compiled-schema cache).",
    ),
]


def test_names_types_and_help_are_the_dashboards_contract() -> None:
    text = GatewayMetrics.create(cache_stats=_Stats).render().decode()
    for name, kind, help_text in CONTRACT:
        assert f"# HELP {name} {help_text}\n" in text, name
        assert f"# TYPE {name} {kind}\n" in text, name
    declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert declared == {name for name, _, _ in CONTRACT}  # nothing else (no process_*)
    assert "_created" not in text


def test_gateway_metric_set_exports_every_named_series() -> None:
    stats = _Stats(hits=5, misses=2, evictions=1, size=3, bytes=4096)
    m = GatewayMetrics.create(cache_stats=lambda: stats)
    m.bind(ledger_queue_depth=lambda: 4, ratelimit_fail_open=lambda: 6, inflight=lambda: 1)
    m.count_request("/v1/chat/completions", 200, None)
    m.count_request("/v1/chat/completions", 422, "tool_arguments_invalid")
    m.observe_upstream("amara", 0.3)
    m.count_upstream_calls("amara", first=1, corrections=1, retried={"502": 2})
    m.count_rate_decision(True)
    m.count_rate_decision(False)
    s = _samples(m)
    route = ("route", "/v1/chat/completions")
    assert s[("syntic_requests_total", (("code", ""), route, ("status", "200")))] == 1
    assert (
        s[("syntic_requests_total", (("code", "tool_arguments_invalid"), route, ("status", "422")))]
        == 1
    )
    assert s[("syntic_tool_arguments_invalid_total", (("code", "tool_arguments_invalid"),))] == 1
    assert s[("syntic_upstream_latency_seconds_count", (("model", "amara"),))] == 1
    assert s[("syntic_upstream_latency_seconds_bucket", (("le", "0.25"), ("model", "amara")))] == 0
    assert s[("syntic_upstream_latency_seconds_bucket", (("le", "0.5"), ("model", "amara")))] == 1
    assert s[("syntic_upstream_calls_total", (("kind", "first"), ("model", "amara")))] == 1
    assert s[("syntic_upstream_calls_total", (("kind", "correction"), ("model", "amara")))] == 1
    assert s[("syntic_upstream_calls_total", (("kind", "retry"), ("model", "amara")))] == 2
    assert s[("syntic_upstream_retries_total", (("model", "amara"), ("reason", "502")))] == 2
    assert s[("syntic_schema_corrections_total", ())] == 1
    assert s[("syntic_ratelimit_decisions_total", (("decision", "allowed"),))] == 1
    assert s[("syntic_ratelimit_decisions_total", (("decision", "limited"),))] == 1
    assert s[("syntic_ratelimit_fail_open_total", ())] == 6
    assert s[("syntic_ratelimit_redis_trips_total", ())] == 0  # not bound: exported, zero
    assert s[("syntic_ledger_queue_depth", ())] == 4
    assert s[("syntic_inflight_requests", ())] == 1
    assert s[("syntic_schema_cache_hits_total", ())] == 5
    assert s[("syntic_schema_cache_misses_total", ())] == 2
    assert s[("syntic_schema_cache_evictions_total", ())] == 1
    assert s[("syntic_schema_cache_size", ())] == 3
    assert s[("syntic_schema_cache_bytes", ())] == 4096


def test_fed_values_are_read_at_scrape_time_and_counters_never_go_back() -> None:
    source = {"trips": 3.0, "depth": 7.0}
    m = GatewayMetrics.create(cache_stats=_Stats)
    m.bind(
        ratelimit_redis_trips=lambda: source["trips"], ledger_queue_depth=lambda: source["depth"]
    )
    trips, depth = ("syntic_ratelimit_redis_trips_total", ()), ("syntic_ledger_queue_depth", ())
    assert (_samples(m)[trips], _samples(m)[depth]) == (3, 7)
    source.update(trips=10.0, depth=2.0)  # read when scraped, not when bound
    assert (_samples(m)[trips], _samples(m)[depth]) == (10, 2)
    source["trips"] = 1.0  # the source restarted: the counter keeps its total ...
    assert _samples(m)[trips] == 10
    source["trips"] = 4.0  # ... and counts what the new source adds
    assert _samples(m)[trips] == 13


def test_a_failing_source_keeps_its_last_value_and_the_rest_renders() -> None:
    calls = {"n": 0}

    def flaky() -> float:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("backend gone")
        return 5.0

    m = GatewayMetrics.create(cache_stats=_Stats)
    m.bind(ledger_queue_depth=flaky)
    assert _samples(m)[("syntic_ledger_queue_depth", ())] == 5
    m.count_request("/v1/models", 200, None)
    s = _samples(m)
    assert calls["n"] == 2
    assert s[("syntic_ledger_queue_depth", ())] == 5
    assert (
        s[("syntic_requests_total", (("code", ""), ("route", "/v1/models"), ("status", "200")))]
        == 1
    )


@pytest.mark.parametrize("code", ['quote"inside', "back\\slash", "new\nline", "ünïcode", ""])
def test_label_values_round_trip(code: str) -> None:
    m = GatewayMetrics.create(cache_stats=_Stats)
    m.count_request("/v1/messages", 400, code)
    key = ("syntic_requests_total", (("code", code), ("route", "/v1/messages"), ("status", "400")))
    assert _samples(m)[key] == 1


def test_updates_from_several_threads_are_not_lost() -> None:
    m = GatewayMetrics.create(cache_stats=_Stats)
    start = threading.Barrier(4)

    def work(i: int) -> None:
        start.wait()
        for n in range(2500):
            m.count_request("/v1/chat/completions", 200 + n % 2, None)  # children made racing
            m.observe_upstream(f"m{n % 3}", 0.5)
            m.count_rate_decision(n % 2 == 0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = _samples(m)
    route = ("route", "/v1/chat/completions")
    assert s[("syntic_requests_total", (("code", ""), route, ("status", "200")))] == 5000
    assert s[("syntic_requests_total", (("code", ""), route, ("status", "201")))] == 5000
    assert (
        sum(s[("syntic_upstream_latency_seconds_count", (("model", f"m{k}"),))] for k in range(3))
        == 10000
    )
    assert s[("syntic_ratelimit_decisions_total", (("decision", "allowed"),))] == 5000
