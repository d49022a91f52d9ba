"""``/metrics`` under ``syntic serve --workers 2``: every scrape shows the whole server.

Each scrape opens a new connection, so either worker may answer it; requests go out on
new connections too, so both workers serve them. Counters must never go backwards from
one scrape to the next, and once the requests are done every scrape must count all of
them, whichever worker answers.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import httpx2
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway_proc import (
    GatewayProcess,
    free_port,
    model_table,
    serve_replica,
    start_gateway,
)
from tests.support.scripted_upstream import Reply, ScriptedUpstream

REQUESTS = 40
Series = tuple[str, tuple[tuple[str, str], ...]]

CHAT = (
    "syntic_requests_total",
    (("code", ""), ("route", "/v1/chat/completions"), ("status", "200")),
)
FIRST_CALLS = ("syntic_upstream_calls_total", (("kind", "first"), ("model", "m")))
LATENCY_COUNT = ("syntic_upstream_latency_seconds_count", (("model", "m"),))
INFLIGHT = ("syntic_inflight_requests", ())
MONOTONIC = ("counter", "histogram")


@pytest.fixture
def two_workers(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[GatewayProcess]:
    # migrate and create a key the ordinary way, then serve the same config with 2 workers
    gw = start_gateway(tmp_path, [model_table("m", upstream.base_url)], key_name="workers")
    gw.stop()
    (tmp_path / "tmp").mkdir()  # where serve makes the metrics directory
    env = {**gw.env, "TMPDIR": str(tmp_path / "tmp")}
    multi = serve_replica(
        gw, free_port(), tmp_path / "workers.log", env, args=("--workers", "2"), ready_timeout=30
    )
    try:
        yield multi
    finally:
        multi.stop()


def _scrape(base_url: str, types: tuple[str, ...] = MONOTONIC) -> dict[Series, float]:
    """The samples of ``types`` in one scrape on a fresh connection."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        res = client.get("/metrics")
    assert res.status_code == 200
    out: dict[Series, float] = {}
    for family in text_string_to_metric_families(res.text):
        if family.type not in types:
            continue
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _chat(gw: GatewayProcess, text: str, timeout: float = 20) -> str | None:
    """One chat completion through the openai SDK on a connection of its own."""
    with httpx2.Client(limits=httpx2.Limits(max_keepalive_connections=0)) as http:
        client = openai.OpenAI(
            base_url=gw.base_url + "/v1",
            api_key=gw.api_key,
            http_client=http,
            max_retries=0,
            timeout=timeout,
        )
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": text}]
        )
    return reply.choices[0].message.content


def _worker_pids(gw: GatewayProcess) -> set[int]:
    return {int(p) for p in re.findall(r"startup heap frozen: \d+ objects \(pid (\d+)\)", gw.log())}


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not reached in {timeout} s: {what}"
        time.sleep(0.05)


def _went_back(before: dict[Series, float], after: dict[Series, float]) -> list[str]:
    return [
        f"{name}{dict(labels)}: {value} -> {after.get((name, labels), 0.0)}"
        for (name, labels), value in before.items()
        if after.get((name, labels), 0.0) < value
    ]


def test_counters_never_go_backwards_and_count_every_request(
    two_workers: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    (metrics_dir,) = Path(two_workers.env["TMPDIR"]).glob("syntic-metrics-*")
    upstream.queue(*(Reply(content="ok") for _ in range(REQUESTS)))
    seen = _scrape(two_workers.base_url)
    for i in range(REQUESTS):
        assert _chat(two_workers, f"hello {i}") == "ok"
        now = _scrape(two_workers.base_url)
        assert not _went_back(seen, now), f"after request {i + 1}: {_went_back(seen, now)}"
        seen = now
    for _ in range(8):  # any worker may answer: each must report the whole server
        now = _scrape(two_workers.base_url)
        assert not _went_back(seen, now), _went_back(seen, now)
        assert now.get(CHAT) == REQUESTS, now.get(CHAT)
        assert now.get(FIRST_CALLS) == REQUESTS, now.get(FIRST_CALLS)
        assert now.get(LATENCY_COUNT) == REQUESTS, now.get(LATENCY_COUNT)
        seen = now
    assert two_workers.stop() in (0, -signal.SIGTERM)
    assert "Traceback" not in two_workers.log()
    assert not metrics_dir.exists()  # a restart starts from zero, not from these counts


def test_a_killed_worker_keeps_its_counts_and_leaves_the_inflight_gauge(
    two_workers: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(*(Reply(content="ok") for _ in range(10)))
    for i in range(10):
        assert _chat(two_workers, f"before {i}") == "ok"
    upstream.queue(Reply(content="never sent", delay=60))
    cut: list[BaseException] = []

    def in_flight() -> None:
        try:
            _chat(two_workers, "hold on", timeout=60)
        except openai.APIError as exc:  # its worker is killed under it
            cut.append(exc)

    holder = threading.Thread(target=in_flight)
    holder.start()
    upstream.wait_for_requests(11, timeout=10)

    def inflight() -> float:
        return _scrape(two_workers.base_url, ("gauge",))[INFLIGHT]

    # the held request and this scrape, whichever worker answers (the other worker's
    # count reaches the merge within its feed interval)
    _until(lambda: inflight() == 2, 20, "the held request in the gauge")
    old = _worker_pids(two_workers)
    assert len(old) == 2
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    holder.join(30)
    assert cut and not holder.is_alive()
    _until(lambda: len(_worker_pids(two_workers) - old) == 2, 60, "both workers replaced")
    # the dead workers' in-flight request leaves the gauge; only this scrape remains
    _until(lambda: inflight() == 1, 20, "dead workers' gauges dropped")
    counts = _scrape(two_workers.base_url)
    assert counts[CHAT] == 10 and counts[FIRST_CALLS] == 10  # counted before the kill, kept
