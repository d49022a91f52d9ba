"""The usage ledger on real databases: batching, flush on close, one row per outcome,
spool-and-replay through outages with no duplicates."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import select
import shutil
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from gateway.storage import Database, open_database
from gateway.storage.migrate import apply_migrations
from gateway.usage.base import UsageRecord
from gateway.usage.ledger import FIELDS, DbLedger

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rec(request_id: str, **changes: object) -> UsageRecord:
    now = time.time()
    base = UsageRecord(
        request_id=request_id,
        key_id="key_t",
        model="m1",
        endpoint="/v1/chat/completions",
        status=200,
        error_code=None,
        streamed=False,
        prompt_tokens=10,
        completion_tokens=5,
        correction_prompt_tokens=0,
        correction_completion_tokens=0,
        schema_retries=0,
        upstream_calls=1,
        latency_ms=12.5,
        started_at=now - 0.1,
        finished_at=now,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


async def count(db: Database, prefix: str) -> int:
    rows = await db.fetch(
        "SELECT COUNT(*), COUNT(DISTINCT request_id) FROM usage_records WHERE request_id LIKE ?",
        (prefix + "%",),
    )
    total, distinct = int(rows[0][0]), int(rows[0][1])
    assert total == distinct
    return total


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    handle = open_database(db_url)
    yield handle
    await handle.aclose()


def pfx() -> str:
    return f"req_{secrets.token_hex(4)}_"


def _own_spool(data_dir: Path) -> list[Path]:
    return list(data_dir.glob(f"usage-spool-{os.getpid()}-*.jsonl"))


async def test_record_spools_without_a_database_round_trip(tmp_path: Path) -> None:
    # A database that accepts connections and never answers: a round trip would show up as
    # a connection waiting in its backlog.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        ledger = DbLedger(open_database(f"postgresql://x@127.0.0.1:{port}/x"), tmp_path)
        for i in range(5000):
            ledger.record(rec(f"r{i}"))
        await asyncio.sleep(0.1)  # room for anything record() may have scheduled
        assert ledger.queue_depth == 5000
        assert select.select([listener], [], [], 0)[0] == []  # no connection was attempted
    # Each row is already in this process's spool file (one line each), before any flush.
    (spool,) = _own_spool(tmp_path)
    assert len(spool.read_bytes().splitlines()) == 5000
    ledger.spool.close(keep=True)


async def test_full_batch_is_written_without_waiting_for_the_timer(
    db: Database, tmp_path: Path
) -> None:
    p = pfx()
    ledger = DbLedger(db, tmp_path, flush_interval_s=30.0, batch_size=100)
    ledger.start()
    try:
        for i in range(99):
            ledger.record(rec(f"{p}{i}"))
        await asyncio.sleep(0.3)
        assert await count(db, p) == 0  # below a batch: waits for the timer
        ledger.record(rec(f"{p}99"))  # the 100th fills a batch

        async def all_in() -> bool:
            return await count(db, p) == 100

        await eventually(all_in, within=5)
        assert ledger.queue_depth == 0
    finally:
        await ledger.aclose()


async def test_timer_flushes_partial_batches(db: Database, tmp_path: Path) -> None:
    p = pfx()
    ledger = DbLedger(db, tmp_path, flush_interval_s=0.05, batch_size=500)
    ledger.start()
    try:
        for i in range(1234):
            ledger.record(rec(f"{p}{i}"))

        async def all_in() -> bool:
            return await count(db, p) == 1234

        await eventually(all_in)
        assert ledger.written >= 1234
    finally:
        await ledger.aclose()


async def test_close_flushes_everything(db: Database, tmp_path: Path) -> None:
    p = pfx()
    ledger = DbLedger(db, tmp_path, flush_interval_s=60.0, batch_size=10_000)
    ledger.start()
    for i in range(737):
        ledger.record(rec(f"{p}{i}"))
    await ledger.aclose()
    assert await count(db, p) == 737
    assert ledger.queue_depth == 0


OUTCOMES: dict[str, dict[str, Any]] = {
    "success": {},
    "corrected": dict(
        schema_retries=1,
        upstream_calls=2,
        correction_prompt_tokens=40,
        correction_completion_tokens=9,
    ),
    "bad_request_400": dict(
        status=400,
        error_code="invalid_request",
        prompt_tokens=0,
        completion_tokens=0,
        upstream_calls=0,
        model=None,
    ),
    "unauthenticated_401": dict(
        status=401,
        error_code="invalid_api_key",
        key_id=None,
        prompt_tokens=0,
        completion_tokens=0,
        upstream_calls=0,
    ),
    "unprocessable_422": dict(
        status=422,
        error_code="tool_arguments_invalid",
        schema_retries=1,
        upstream_calls=2,
        correction_prompt_tokens=55,
        correction_completion_tokens=11,
    ),
    "rate_limited_429": dict(
        status=429,
        error_code="rate_limit_exceeded",
        prompt_tokens=0,
        completion_tokens=0,
        upstream_calls=0,
    ),
    "upstream_failure_502": dict(status=502, error_code="upstream_error", completion_tokens=0),
    "upstream_timeout_504": dict(status=504, error_code="upstream_timeout", completion_tokens=0),
    "client_disconnect": dict(
        status=499,
        error_code="client_disconnected",
        streamed=True,
        completion_tokens=17,
        estimated=True,
    ),
    "streamed": dict(streamed=True, endpoint="/v1/messages", model="claude-ish"),
}


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
async def test_one_row_per_outcome(db: Database, tmp_path: Path, outcome: str) -> None:
    record = rec(f"{pfx()}{outcome}", **OUTCOMES[outcome])
    ledger = DbLedger(db, tmp_path)
    ledger.start()
    ledger.record(record)
    await ledger.aclose()
    rows = await db.fetch(
        f"SELECT {', '.join(FIELDS)} FROM usage_records WHERE request_id = ?",
        (record.request_id,),
    )
    assert len(rows) == 1
    got = dict(zip(FIELDS, rows[0], strict=True))
    got["streamed"] = bool(got["streamed"])
    got["estimated"] = bool(got["estimated"])
    assert UsageRecord(**got) == record


async def test_spool_while_down_then_replay_without_duplicates(
    db: Database, tmp_path: Path
) -> None:
    p = pfx()
    spool = tmp_path / "data"
    dead = DbLedger(
        open_database(f"postgresql://x@127.0.0.1:{_dead_port()}/x"), spool, flush_interval_s=0.05
    )
    dead.start()
    for i in range(25):
        dead.record(rec(f"{p}{i}"))

    async def spooled() -> bool:
        return dead.spooled >= 25

    await eventually(spooled)
    for i in range(25, 40):
        dead.record(rec(f"{p}{i}"))
    await dead.aclose()  # database still down: the rest goes to the spool too
    assert dead.spooled == 40 and dead.spool_pending
    files = list(spool.glob("usage-spool-*.jsonl"))
    assert files
    # A copy of the same rows, as if a crashed replay left them behind: replay must not
    # duplicate anything.
    shutil.copy(files[0], spool / "usage-spool-duplicate.jsonl")

    live = DbLedger(db, spool)
    live.start()
    try:

        async def replayed() -> bool:
            return not live.spool_pending

        await eventually(replayed)
    finally:
        await live.aclose()
    assert await count(db, p) == 40
    assert list(spool.glob("usage-*.jsonl")) == []


async def test_outage_mid_run_spools_and_recovers_by_itself(tmp_path: Path) -> None:
    name = f"syntic_t_{secrets.token_hex(6)}"
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    admin = await asyncpg.connect(PG_ADMIN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    db = open_database(url)
    ledger = DbLedger(db, tmp_path, flush_interval_s=0.05, retry_interval_s=0.1)
    try:
        await apply_migrations(db)
        ledger.start()
        for i in range(10):
            ledger.record(rec(f"a{i}"))

        async def first_in() -> bool:
            return ledger.written == 10

        await eventually(first_in)
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        for i in range(10):
            ledger.record(rec(f"b{i}"))

        async def spooled() -> bool:
            return ledger.spooled == 10

        await eventually(spooled)
        await admin.execute(f'CREATE DATABASE "{name}"')
        await apply_migrations(db)  # the old rows are gone with the dropped database
        for i in range(10):
            ledger.record(rec(f"c{i}"))

        async def recovered() -> bool:
            if ledger.spool_pending or ledger.queue_depth:
                return False
            return int((await db.fetch("SELECT COUNT(*) FROM usage_records"))[0][0]) >= 20

        await eventually(recovered)
        await ledger.aclose()
        assert ledger.replayed >= 10
        rows = await db.fetch("SELECT request_id FROM usage_records ORDER BY request_id")
        ids = [r[0] for r in rows]
        # The rows written before the drop are still in the spool file (it is replayed
        # whole), so they may come back into the re-created database, once each.
        expected = {f"b{i}" for i in range(10)} | {f"c{i}" for i in range(10)}
        assert expected <= set(ids) <= expected | {f"a{i}" for i in range(10)}
    finally:
        await ledger.aclose()
        await db.aclose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_close_during_a_large_write_loses_nothing(db: Database, tmp_path: Path) -> None:
    p = pfx()
    ledger = DbLedger(db, tmp_path, flush_interval_s=0.01, batch_size=2000)
    ledger.start()
    for i in range(20_000):
        ledger.record(rec(f"{p}{i}"))
    await asyncio.sleep(0.05)  # the writer is now busy with the first batches
    await ledger.aclose()
    assert ledger.queue_depth == 0
    assert await count(db, p) == 20_000


async def test_loose_types_are_normalised_and_bad_rows_set_aside(
    db: Database, tmp_path: Path
) -> None:
    """A float token count or int timestamp is coerced; a value no column accepts is kept
    aside in a rejects file instead of blocking the rows around it."""
    p = pfx()
    ledger = DbLedger(db, tmp_path)
    ledger.start()
    ledger.record(rec(f"{p}loose", prompt_tokens=12.0, started_at=int(time.time()), streamed=1))
    ledger.record(rec(f"{p}bad", prompt_tokens="lots"))
    ledger.record(rec(f"{p}fine"))
    await ledger.aclose()
    rows = await db.fetch(
        "SELECT request_id, prompt_tokens, streamed FROM usage_records WHERE request_id LIKE ?"
        " ORDER BY request_id",
        (p + "%",),
    )
    assert [(r[0], int(r[1]), bool(r[2])) for r in rows] == [
        (f"{p}fine", 10, False),
        (f"{p}loose", 12, True),
    ]
    assert ledger.rejected == 1
    rejects = (tmp_path / f"usage-rejected-{os.getpid()}.jsonl").read_text()
    assert f"{p}bad" in rejects and f"{p}fine" not in rejects
    assert not ledger.spool_pending  # a bad row is not an outage


async def test_missing_table_spools_instead_of_discarding(tmp_path: Path) -> None:
    """An unmigrated database refuses every insert, but that's the environment, not the
    rows: they are spooled for later, not set aside as bad."""
    db = open_database(f"sqlite:///{tmp_path}/unmigrated.db")
    ledger = DbLedger(db, tmp_path / "data")
    ledger.start()
    for i in range(5):
        ledger.record(rec(f"u{i}"))
    await ledger.aclose()
    assert ledger.rejected == 0 and ledger.spooled == 5 and ledger.spool_pending
    await apply_migrations(db)
    again = DbLedger(db, tmp_path / "data")
    again.start()
    await again.aclose()
    assert await count(db, "u") == 5
    await db.aclose()
