"""``syntic serve`` as operators run it: ``--workers N``, and SIGTERM draining in-flight
requests and flushing the ledger before the process exits."""

from __future__ import annotations

import contextlib
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway_proc import (
    ROOT,
    GatewayProcess,
    free_port,
    model_table,
    start_gateway,
    wait_ready,
)
from tests.support.scripted_upstream import Reply, ScriptedUpstream


def _rows(db: Path, request_ids: list[str]) -> dict[str, Any]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        marks = ",".join("?" * len(request_ids))
        rows = conn.execute(
            f"SELECT * FROM usage_records WHERE request_id IN ({marks})", request_ids
        ).fetchall()
    return {r["request_id"]: dict(r) for r in rows}


def test_sigterm_drains_in_flight_and_flushes_the_ledger(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    gw = start_gateway(tmp_path, [model_table("m", upstream.base_url)], key_name="drain")
    try:
        upstream.queue(Reply(content="slow answer", delay=1.5))
        quick_ids = []
        for _ in range(5):  # finished before the stop: must be flushed, not lost
            upstream.queue(Reply(content="quick"))
        results: dict[str, httpx.Response] = {}

        def slow() -> None:
            results["slow"] = httpx.post(
                gw.base_url + "/v1/chat/completions",
                headers={"authorization": f"Bearer {gw.api_key}"},
                json={"model": "m", "messages": [{"role": "user", "content": "take your time"}]},
                timeout=20,
            )

        thread = threading.Thread(target=slow)
        thread.start()
        upstream.wait_for_requests(1, timeout=5)  # the slow one reached the upstream
        for _ in range(5):
            res = httpx.post(
                gw.base_url + "/v1/chat/completions",
                headers={"authorization": f"Bearer {gw.api_key}"},
                json={"model": "m", "messages": [{"role": "user", "content": "quick"}]},
                timeout=20,
            )
            assert res.status_code == 200
            quick_ids.append(res.headers["x-request-id"])
        gw.proc.send_signal(signal.SIGTERM)  # while the slow request is still in flight
        thread.join(20)
        # uvicorn re-raises SIGTERM after its graceful shutdown; the drain and the flush
        # are checked below, from what the client got and what the ledger holds.
        assert gw.proc.wait(20) in (0, -signal.SIGTERM)
    finally:
        gw.stop()

    slow_res = results["slow"]
    assert slow_res.status_code == 200, slow_res.text  # drained, not cut
    assert slow_res.json()["choices"][0]["message"]["content"] == "slow answer"
    db = Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))
    ids = [slow_res.headers["x-request-id"], *quick_ids]
    rows = _rows(db, ids)  # read after exit: only a flush on shutdown can have put them there
    assert sorted(rows) == sorted(ids)
    assert {r["status"] for r in rows.values()} == {200}
    assert "Traceback" not in gw.log()
    assert gw.log().count("startup heap frozen") == 1  # one process, frozen once


@pytest.fixture
def workers(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[GatewayProcess]:
    # migrate and create a key the ordinary way, then restart with --workers 2
    gw = start_gateway(tmp_path, [model_table("m", upstream.base_url)], key_name="workers")
    gw.stop()
    port = free_port()
    log = tmp_path / "workers.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway",
                "serve",
                "--config",
                str(gw.config_path),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "2",
            ],
            env=gw.env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    multi = GatewayProcess(proc, port, gw.api_key, gw.config_path, gw.env, log, [gw.api_key])
    try:
        wait_ready(multi.base_url, proc, timeout=30)
        yield multi
    finally:
        multi.stop()


def test_workers_serve_and_stop_cleanly(workers: GatewayProcess) -> None:
    auth = {"authorization": f"Bearer {workers.api_key}"}
    with httpx.Client(base_url=workers.base_url, timeout=10) as client:
        statuses = [client.get("/v1/models", headers=auth).status_code for _ in range(20)]
        ready = client.get("/readyz")
        assert client.get("/metrics").status_code == 200
    assert statuses == [200] * 20
    assert ready.status_code == 200, ready.text
    assert workers.stop() in (0, -signal.SIGTERM)
    log = workers.log()
    assert "Traceback" not in log
    # each worker process configured the JSON request log itself
    assert log.count('"route":"/v1/models"') == 20
    # ... and froze its startup heap, as a single-process serve does
    frozen = set(re.findall(r"startup heap frozen: [1-9][0-9]* objects \(pid ([0-9]+)\)", log))
    assert len(frozen) == 2, log[-2000:]
    assert str(workers.proc.pid) not in frozen  # the workers, not the supervisor
