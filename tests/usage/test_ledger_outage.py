"""A real network outage between the ledger and a real PostgreSQL (the link is cut, the
server keeps running): rows spool locally and are replayed exactly once when it's back."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from gateway.storage import open_database
from gateway.storage.migrate import apply_migrations
from gateway.usage.base import UsageRecord
from gateway.usage.ledger import DbLedger
from tests.fleet.netcut import NetCut

PG = "postgresql://postgres@127.0.0.1:5432"


def rec(request_id: str) -> UsageRecord:
    now = time.time()
    return UsageRecord(
        request_id, "key_o", "m", "/v1/messages", 200, None, True, 3, 4, 0, 0, 0, 1, 2.0, now, now
    )


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


@pytest.fixture
async def pg_name() -> AsyncIterator[str]:
    name = f"syntic_t_{secrets.token_hex(6)}"
    admin = await asyncpg.connect(f"{PG}/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    db = open_database(f"{PG}/{name}")
    await apply_migrations(db)
    await db.aclose()
    yield name
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


async def _ids(name: str) -> list[str]:
    conn = await asyncpg.connect(f"{PG}/{name}")
    try:
        return [r[0] for r in await conn.fetch("SELECT request_id FROM usage_records")]
    finally:
        await conn.close()


async def test_cut_link_spools_then_replays_exactly_once(pg_name: str, tmp_path: Path) -> None:
    with NetCut(5432) as link:
        db = open_database(f"postgresql://postgres@127.0.0.1:{link.port}/{pg_name}")
        ledger = DbLedger(db, tmp_path, flush_interval_s=0.05, retry_interval_s=0.1)
        ledger.start()
        try:
            for i in range(50):
                ledger.record(rec(f"before{i}"))

            async def first() -> bool:
                return ledger.written == 50

            await eventually(first)
            link.cut()
            for i in range(50):
                ledger.record(rec(f"during{i}"))

            async def spooled() -> bool:
                return ledger.spooled == 50

            await eventually(spooled)
            assert ledger.spool_pending
            link.restore()
            for i in range(50):
                ledger.record(rec(f"after{i}"))

            async def drained() -> bool:
                return (
                    not ledger.spool_pending
                    and ledger.queue_depth == 0
                    and len(await _ids(pg_name)) == 150
                )

            await eventually(drained)
        finally:
            await ledger.aclose()
            await db.aclose()
    ids = await _ids(pg_name)
    assert len(ids) == len(set(ids)) == 150


async def test_stop_during_outage_loses_nothing(pg_name: str, tmp_path: Path) -> None:
    with NetCut(5432) as link:
        db = open_database(f"postgresql://postgres@127.0.0.1:{link.port}/{pg_name}")
        ledger = DbLedger(db, tmp_path, flush_interval_s=5.0)
        ledger.start()
        link.cut()
        for i in range(30):
            ledger.record(rec(f"x{i}"))
        await ledger.aclose()  # clean stop while the database is unreachable
        await db.aclose()
    assert ledger.spooled == 30
    # Next start, database reachable: the spool is replayed.
    db = open_database(f"{PG}/{pg_name}")
    again = DbLedger(db, tmp_path)
    again.start()
    await again.aclose()
    await db.aclose()
    assert sorted(await _ids(pg_name)) == sorted(f"x{i}" for i in range(30))
    assert not again.spool_pending


async def test_stop_right_after_recovery_writes_to_the_database(
    pg_name: str, tmp_path: Path
) -> None:
    """The link is back but the retry timer hasn't fired yet: a clean stop still puts
    every row (queued and spooled) into the database instead of leaving them spooled."""
    with NetCut(5432) as link:
        db = open_database(f"postgresql://postgres@127.0.0.1:{link.port}/{pg_name}")
        ledger = DbLedger(db, tmp_path, flush_interval_s=0.05, retry_interval_s=60.0)
        ledger.start()
        link.cut()
        for i in range(20):
            ledger.record(rec(f"s{i}"))

        async def spooled() -> bool:
            return ledger.spooled == 20

        await eventually(spooled)
        link.restore()
        for i in range(20):
            ledger.record(rec(f"q{i}"))
        await ledger.aclose()
        await db.aclose()
    assert sorted(await _ids(pg_name)) == sorted(
        [f"s{i}" for i in range(20)] + [f"q{i}" for i in range(20)]
    )
    assert not ledger.spool_pending
