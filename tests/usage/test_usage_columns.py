"""The ledger's cache, reasoning and estimated columns on SQLite and PostgreSQL: the
migration that adds them reaches a database already past it in the order, the ledger
writes them (through the spool, older spool lines included), and the admin queries and
``syntic usage`` report them."""

from __future__ import annotations

import dataclasses
import os
import secrets
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from gateway.admin.queries import RequestFilter, Window, aggregate, recent_requests
from gateway.storage import open_database
from gateway.storage.migrate import applied_versions, apply_migrations, load_migrations
from gateway.usage.base import UsageRecord
from gateway.usage.ledger import DbLedger
from gateway.usage.report import summarize
from gateway.usage.spool import parse
from tests.support.databases import pg_database, run_sync

DETAIL_COLUMNS = ("cache_read_tokens", "cache_creation_tokens", "reasoning_tokens")
ADDED_BY = "0004"


def rec(key: str, n: int, **changes: object) -> UsageRecord:
    now = time.time()
    base = UsageRecord(
        request_id=f"{key}_{n}",
        key_id=key,
        model="m1",
        endpoint="/v1/messages",
        status=200,
        error_code=None,
        streamed=True,
        prompt_tokens=40,
        completion_tokens=12,
        correction_prompt_tokens=60,
        correction_completion_tokens=9,
        schema_retries=1,
        upstream_calls=2,
        latency_ms=5.0,
        started_at=now - 5,
        finished_at=now - 4,
        cache_read_tokens=55,
        cache_creation_tokens=5,
        reasoning_tokens=11,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/syntic.db"
        return
    with pg_database("syntic_usagecols") as url:
        yield url


async def test_a_database_migrated_past_the_gap_gets_the_columns(empty_url: str) -> None:
    every = load_migrations()
    assert ADDED_BY in [m.version for m in every]
    before = [m for m in every if m.version != ADDED_BY]
    assert any(m.version > ADDED_BY for m in before)  # the database is past it already
    db = open_database(empty_url)
    try:
        await apply_migrations(db, before)
        old_columns = (
            "request_id, endpoint, status, streamed, prompt_tokens, completion_tokens, "
            "correction_prompt_tokens, correction_completion_tokens, schema_retries, "
            "upstream_calls, latency_ms, started_at, finished_at"
        )
        await db.execute(
            f"INSERT INTO usage_records ({old_columns}) "
            "VALUES (?, '/v1/messages', 200, FALSE, 15, 3, 0, 0, 0, 1, 1.0, 1.0, 2.0)",
            ("req_old",),
        )
        assert await apply_migrations(db) == [ADDED_BY]
        assert await applied_versions(db) == [m.version for m in every]
        rows = await db.fetch(f"SELECT {', '.join(DETAIL_COLUMNS)}, estimated FROM usage_records")
        assert [tuple(r) for r in rows] == [(0, 0, 0, False)]  # an older row: none known
    finally:
        await db.aclose()


def _records(key: str) -> list[UsageRecord]:
    return [
        rec(key, 0),
        rec(
            key, 1, estimated=True, cache_read_tokens=0, cache_creation_tokens=0, reasoning_tokens=0
        ),
    ]


async def _write(db_url: str, records: list[UsageRecord], spool: Path) -> None:
    db = open_database(db_url)
    try:
        ledger = DbLedger(db, spool)
        for r in records:
            ledger.record(r)
        await ledger.aclose()
    finally:
        await db.aclose()


async def test_the_ledger_writes_and_the_queries_report_the_columns(
    db_url: str, tmp_path: Path
) -> None:
    key = f"key_{secrets.token_hex(8)}"
    await _write(db_url, _records(key), tmp_path)
    db = open_database(db_url)
    try:
        rows = {r["request_id"]: r for r in await recent_requests(db, RequestFilter(key_id=key))}
        assert {
            k: tuple(r[c] for c in (*DETAIL_COLUMNS, "estimated")) for k, r in rows.items()
        } == {f"{key}_0": (55, 5, 11, False), f"{key}_1": (0, 0, 0, True)}
        (total,) = await aggregate(db, Window(0.0, time.time() + 10), key_id=key)
        assert (
            total.cache_read_tokens,
            total.cache_creation_tokens,
            total.reasoning_tokens,
            total.estimated,
        ) == (55, 5, 11, 1)
        report = total.to_json()
        assert (report["cache_read_tokens"], report["reasoning_tokens"]) == (55, 11)
        (summary,) = await summarize(db, key_id=key)
        assert (
            summary.cache_read_tokens,
            summary.cache_creation_tokens,
            summary.reasoning_tokens,
            summary.estimated,
        ) == (55, 5, 11, 1)
    finally:
        await db.aclose()


def test_syntic_usage_reports_the_columns(db_url: str, tmp_path: Path) -> None:
    key = f"key_{secrets.token_hex(8)}"
    run_sync(_write(db_url, _records(key), tmp_path))
    env = {**os.environ, "SYNTIC_DATABASE_URL": db_url}
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "usage", "--key", key, "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (row,) = orjson.loads(out.stdout)
    assert {c: row[c] for c in (*DETAIL_COLUMNS, "estimated")} == {
        "cache_read_tokens": 55,
        "cache_creation_tokens": 5,
        "reasoning_tokens": 11,
        "estimated": 1,
    }
    table = subprocess.run(
        [sys.executable, "-m", "gateway", "usage", "--key", key],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    head, line = table.stdout.splitlines()
    cells = dict(zip(head.split(), line.split(), strict=True))
    assert (cells["CACHE_RD"], cells["CACHE_WR"], cells["REASON"], cells["EST"]) == (
        "55",
        "5",
        "11",
        "1",
    )


def test_spool_lines_keep_the_columns_and_older_lines_still_replay() -> None:
    record = rec("key_spool", 0)
    line = orjson.dumps(record)
    older = orjson.loads(line)
    for column in DETAIL_COLUMNS:
        del older[column]  # written before the columns existed
    older["request_id"] = "key_spool_old"
    parsed = parse([line + b"\n" + orjson.dumps(older) + b"\n"])
    assert parsed.unreadable == 0
    assert parsed.final["key_spool_0"] == record
    old = parsed.final["key_spool_old"]
    assert (old.cache_read_tokens, old.cache_creation_tokens, old.reasoning_tokens) == (0, 0, 0)


async def test_a_dead_processs_spool_replays_the_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/syntic.db"
    db = open_database(url)
    try:
        await apply_migrations(db)
        record = rec("key_dead", 0)
        # What a process killed before its writer ran leaves behind: a spool file no one
        # holds a lock on.
        (tmp_path / "spool").mkdir()
        orphan = tmp_path / "spool" / "usage-spool-1-000000000000.jsonl"
        orphan.write_bytes(orjson.dumps(record) + b"\n")
        ledger = DbLedger(db, tmp_path / "spool")
        ledger.start()
        await ledger.aclose()
    finally:
        await db.aclose()
    conn = sqlite3.connect(f"{tmp_path}/syntic.db")
    try:
        got = conn.execute(
            f"SELECT {', '.join(DETAIL_COLUMNS)} FROM usage_records WHERE request_id = ?",
            (record.request_id,),
        ).fetchall()
    finally:
        conn.close()
    assert got == [(55, 5, 11)]
