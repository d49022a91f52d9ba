"""CPU cost of the ops layer per request (not a test).

.venv/bin/python -m tests.ops.bench_observer
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from gateway.context import RequestContext
from gateway.keys.base import Principal
from gateway.observability.logs import RequestLog, configure_logging, log_request
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.observer import RequestObserver
from gateway.routes.table import metric_paths


class _Stats:
    hits = misses = evictions = size = bytes = 0


def bench(label: str, fn: Callable[[], object], n: int = 30000) -> None:
    best = 1e9
    for _ in range(5):
        t = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t) / n)
    print(f"{label}: {best * 1e6:.2f} us CPU")


def main() -> None:
    m = GatewayMetrics.create(cache_stats=_Stats)
    obs = RequestObserver(m, metric_paths())
    configure_logging("info", "json", stream=io.StringIO())
    ctx = RequestContext.start("req_x", "/v1/chat/completions")
    ctx.principal = Principal(key_id="key_abc", name="n")
    ctx.model, ctx.status = "m", 200
    entry = RequestLog(
        request_id="req_x",
        route="/v1/chat/completions",
        status=200,
        latency_ms=1.2345,
        key_id="key_abc",
        model="m",
    )
    bench("count_request", lambda: m.count_request("/v1/chat/completions", 200, None))

    def observe() -> None:
        obs.started(ctx)
        obs.finished(ctx)

    bench("log_request (JSON line)", lambda: log_request(entry))
    bench("observer started+finished", observe)
    bench("GET /metrics render", m.render, n=2000)


if __name__ == "__main__":
    main()
