"""The ledger when its spool disk is full during a database outage, through HTTP.

A real tmpfs for the spool (``tests.support.small_disk``), filled to the last page, and a
private PostgreSQL that is stopped: no row can go anywhere but memory. Every request the
gateway answers must have its row once the database is back; past
``ledger_max_held_rows`` rows in memory, new requests are refused with 503
``ledger_unavailable`` (no upstream call) instead of answered without a row.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import httpx
import openai

from tests.support.gateway_proc import (
    GatewayProcess,
    free_port,
    model_table,
    serve_replica,
    start_gateway,
)
from tests.support.private_services import PrivatePostgres
from tests.support.scripted_upstream import RecordedRequest, Reply, ScriptedUpstream, Step
from tests.support.small_disk import SmallDisk

BOUND = 8


def _ok(request: RecordedRequest) -> Step:
    return Reply(content="ok")


def _gateway(
    tmp_path: Path, upstream: ScriptedUpstream, pg: PrivatePostgres, disk: SmallDisk, bound: int
) -> GatewayProcess:
    return start_gateway(
        tmp_path / "gw",
        [model_table("m", upstream.base_url)],
        env={
            "SYNTIC_DATABASE_URL": pg.url,
            "SYNTIC_DATA_DIR": str(disk.path),
            "SYNTIC_LEDGER_MAX_HELD_ROWS": str(bound),
        },
    )


def _ask(client: openai.OpenAI) -> str:
    """One answered chat completion; its request id."""
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().choices[0].message.content == "ok"
    return raw.headers["x-request-id"]


def _ledger_ids(url: str) -> set[str]:
    async def fetch() -> set[str]:
        con = await asyncpg.connect(url, timeout=5)
        try:
            return {r[0] for r in await con.fetch("SELECT request_id FROM usage_records")}
        finally:
            await con.close()

    return asyncio.run(fetch())


def _wait_for_rows(url: str, ids: set[str], timeout: float = 30.0) -> set[str]:
    """The ledger's ids once every one of ``ids`` is there (or the deadline passed)."""
    deadline = time.monotonic() + timeout
    while True:
        found = _ledger_ids(url)
        if ids <= found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _held_rows(gw: GatewayProcess) -> float:
    text = httpx.get(gw.base_url + "/metrics", timeout=5).text
    line = next(m for m in text.splitlines() if m.startswith("syntic_ledger_held_rows"))
    return float(line.split()[-1])


def _wait_held(gw: GatewayProcess, done: float, timeout: float = 15.0) -> float:
    deadline = time.monotonic() + timeout
    while (held := _held_rows(gw)) != done and time.monotonic() < deadline:
        time.sleep(0.05)
    return held


def test_full_spool_and_database_down_answers_only_what_it_can_keep(
    scripted_upstream_server: ScriptedUpstream, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    upstream.responder = _ok
    with PrivatePostgres() as pg, SmallDisk(tmp_path / "spool", size_kib=256) as disk:
        gw = _gateway(tmp_path, upstream, pg, disk, BOUND)
        client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)
        try:
            answered = [_ask(client)]  # the key is cached now
            disk.fill()
            pg.stop()
            refused: openai.APIStatusError | None = None
            # the spool's open file may still take what fits in its last page; after
            # that every answered request's row is in memory only
            for _ in range(BOUND + 40):
                try:
                    answered.append(_ask(client))
                except openai.APIStatusError as exc:
                    refused = exc
                    break
            held = _held_rows(gw)
            calls = len(upstream.requests)

            pg.start()
            found = _wait_for_rows(pg.url, set(answered))
            lost = set(answered) - found
            assert not lost, f"{len(lost)} answered request(s) have no ledger row"
            assert refused is not None, "never refused: answered without a row kept"
            assert refused.status_code == 503
            assert refused.response.json()["error"]["code"] == "ledger_unavailable"
            assert refused.response.headers["retry-after"] == "1"
            assert len(answered) > BOUND
            assert held >= BOUND
            assert calls == len(answered)  # the refusal called nobody
            assert _wait_held(gw, 0) == 0
            answered.append(_ask(client))  # accepting again
        finally:
            client.close()
            gw.stop()
        found = _wait_for_rows(pg.url, set(answered))
    assert set(answered) <= found


def test_held_rows_go_to_the_spool_once_it_has_room_and_survive_a_restart(
    scripted_upstream_server: ScriptedUpstream, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    upstream.responder = _ok
    with PrivatePostgres() as pg, SmallDisk(tmp_path / "spool", size_kib=256) as disk:
        gw = _gateway(tmp_path, upstream, pg, disk, 1000)
        client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)
        try:
            answered = [_ask(client)]
            disk.fill()
            pg.stop()
            for _ in range(40):
                answered.append(_ask(client))
                if _held_rows(gw) >= 3:
                    break
            assert _held_rows(gw) >= 3
            disk.free()
            assert _wait_held(gw, 0) == 0  # offered to the spool again, and taken
        finally:
            client.close()
            gw.stop()  # a clean stop with the database still down
        pg.start()
        # the next process on this data directory replays the spool
        again = serve_replica(gw, free_port(), tmp_path / "again.log")
        try:
            found = _wait_for_rows(pg.url, set(answered))
        finally:
            again.stop()
    lost = set(answered) - found
    assert not lost, f"{len(lost)} answered request(s) have no ledger row"
