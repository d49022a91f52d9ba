"""The low-rate row of ``gateway_bench.py``: one request every few seconds over TLS.

A saturated run keeps every upstream connection busy; a quiet service sends one request
now and then, and pays a new TCP + TLS handshake each time its client drops idle
connections too early. Each tick sends one request straight to the HTTPS mock (its own
kept-alive connection: the floor) and one through the gateway (whose upstream is the same
mock over TLS), then sleeps ``interval_s``. Reports the latency the gateway adds (p50 and
max, client-side) and how many TLS connections the gateway opened to the mock during the
timed requests, from the mock's own count (``GET`` on the mock): 0 means every request
reused the connection the warm-up opened.
"""

from __future__ import annotations

import os
import ssl
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass(frozen=True, slots=True)
class LowRate:
    requests: int
    interval_s: float
    mock_ms: list[float]
    gateway_ms: list[float]
    handshakes: int  # TLS connections the mock accepted during the timed requests

    @property
    def added_p50_ms(self) -> float:
        return statistics.median(self.gateway_ms) - statistics.median(self.mock_ms)

    @property
    def added_max_ms(self) -> float:
        return max(self.gateway_ms) - max(self.mock_ms)

    def line(self) -> str:
        reused = (
            "reused (no new upstream connection)"
            if self.handshakes == 0
            else f"NOT reused: {self.handshakes} new TLS connections for {self.requests} requests"
        )
        return (
            f"low rate, TLS upstream, {self.requests} requests every {self.interval_s:g} s: "
            f"mock p50/max {statistics.median(self.mock_ms):.2f}/{max(self.mock_ms):.2f} ms, "
            f"syntic {statistics.median(self.gateway_ms):.2f}/{max(self.gateway_ms):.2f} ms "
            f"(added p50 {self.added_p50_ms:+.2f} ms, max {self.added_max_ms:+.2f} ms); "
            f"upstream connection {reused}"
        )


def _connections(client: httpx.Client, mock_url: str) -> int:
    count: int = client.get(mock_url + "/stats").json()["connections"]
    return count


def low_rate(
    mock_url: str,
    ca: Path,
    gateway_url: str,
    headers: dict[str, str],
    mock_body: str,
    gateway_body: str,
    *,
    requests: int,
    interval_s: float,
    cpu: int | None,
) -> LowRate:
    """Run the row (``requests`` ticks ``interval_s`` apart, after one warm-up tick);
    the client runs in this process, pinned to ``cpu``."""
    before = None
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
    # Both clients keep their one connection across the gaps, so only the gateway's own
    # upstream pool decides whether a handshake is paid.
    keep = httpx.Limits(max_connections=1, keepalive_expiry=interval_s * 4 + 60)
    tls = ssl.create_default_context(cafile=str(ca))
    target = "/v1/chat/completions"
    mock_ms: list[float] = []
    gw_ms: list[float] = []
    try:
        with (
            httpx.Client(verify=tls, limits=keep, timeout=30) as direct,
            httpx.Client(limits=keep, timeout=30, headers=headers) as through,
            httpx.Client(verify=tls, timeout=10) as stats,
        ):
            start = 0
            for i in range(requests + 1):
                if i == 1:
                    start = _connections(stats, mock_url)
                t0 = time.perf_counter()
                direct.post(mock_url + target, content=mock_body).raise_for_status()
                t1 = time.perf_counter()
                through.post(gateway_url + target, content=gateway_body).raise_for_status()
                t2 = time.perf_counter()
                if i > 0:
                    mock_ms.append((t1 - t0) * 1000)
                    gw_ms.append((t2 - t1) * 1000)
                if i < requests:
                    time.sleep(interval_s)
            handshakes = _connections(stats, mock_url) - start
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
    return LowRate(requests, interval_s, mock_ms, gw_ms, handshakes)
