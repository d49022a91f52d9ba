"""One process keeps the request path's series in plain counts (``Tallies``); a scrape must
print exactly what prometheus_client's own metrics (``Direct``, used under ``--workers``)
print for the same updates, byte for byte."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest

from gateway.observability.direct import Direct
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.series import LATENCY_BUCKETS, RequestPathMetrics
from gateway.observability.tallies import Tallies

Updates = Callable[[RequestPathMetrics], None]


def _tallied(registry: CollectorRegistry) -> RequestPathMetrics:
    tallies = Tallies()
    registry.register(tallies)
    return tallies


def _render(updates: Updates, make: Callable[[CollectorRegistry], RequestPathMetrics]) -> str:
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry(auto_describe=False)
    updates(make(registry))
    return generate_latest(registry).decode()


def _nothing(m: RequestPathMetrics) -> None:
    pass


def _a_busy_minute(m: RequestPathMetrics) -> None:
    m.count_request("/v1/chat/completions", 200, None)
    m.count_request("/v1/chat/completions", 200, "")  # the same series as None
    m.count_request("/v1/messages", 422, "tool_arguments_invalid")
    m.count_request("/v1/messages", 422, None)
    m.count_request("other", 404, "not_found")
    m.count_request("/v1/chat/completions", 200, None)
    m.count_request("/v1/schemas/check", 400, 'quote"and\\slash\nnewline')
    # on every bound, between bounds, past the last one, and zero
    for seconds in (*LATENCY_BUCKETS, 0.0, 0.007, 0.3, 59.9, 61.0, 3600.0):
        m.observe_upstream("amara", seconds)
    m.observe_upstream("ünïcode-model", 0.042)
    m.count_upstream_calls("amara", 1, 0, None)
    m.count_upstream_calls("amara", 1, 1, {"502": 2, "connect": 1})
    m.count_upstream_calls("ünïcode-model", 0, 2, {"429": 1})
    m.count_rate_decision(True)
    m.count_rate_decision(False)
    m.count_rate_decision(True)
    m.count_inflight_refused()


@pytest.mark.parametrize("updates", [_nothing, _a_busy_minute])
def test_tallies_print_what_prometheus_clients_metrics_print(updates: Updates) -> None:
    assert _render(updates, _tallied) == _render(updates, Direct)


def test_one_process_tallies_and_workers_write_the_shared_files(tmp_path: Path) -> None:
    assert isinstance(GatewayMetrics.create().path, Tallies)
    assert isinstance(GatewayMetrics.create(multiprocess_dir=str(tmp_path)).path, Direct)


def test_a_scrape_sees_every_update_before_it() -> None:
    m = GatewayMetrics.create()
    route = 'syntic_requests_total{code="",route="/v1/models",status="200"}'
    assert route not in m.render().decode()
    m.count_request("/v1/models", 200, None)
    assert f"{route} 1.0\n" in m.render().decode()
    m.count_request("/v1/models", 200, None)
    assert f"{route} 2.0\n" in m.render().decode()
