"""The ledger's spool on a disk that fills up (a real tmpfs, ``tests.support.small_disk``):
a row the spool refuses is held, never a torn line left between two whole ones."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.storage import Database, open_database
from gateway.usage.ledger import DbLedger
from gateway.usage.spool import parse
from tests.support.small_disk import SmallDisk
from tests.usage.test_ledger import count, pfx, rec


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    handle = open_database(db_url)
    yield handle
    await handle.aclose()


async def test_a_full_disk_holds_what_the_spool_refused_and_tears_no_line(
    db: Database, tmp_path: Path
) -> None:
    prefix = pfx()
    with SmallDisk(tmp_path / "disk", size_kib=64) as disk:
        ledger = DbLedger(db, disk.path, max_held_rows=5)  # no writer task: flushed below
        # long enough that the last page's room ends inside a line (a short write)
        ledger.record(rec(f"{prefix}first", model="m" * 200))
        disk.fill()
        for i in range(30):
            ledger.record(rec(f"{prefix}full{i}", model="m" * 200))
        held = ledger.held
        assert held > 5
        assert not ledger.accepting
        disk.free()
        for i in range(5):
            ledger.record(rec(f"{prefix}after{i}", model="m" * 200))
        files = list(disk.path.glob(f"usage-spool-{os.getpid()}-*.jsonl"))
        parsed = parse(f.read_bytes() for f in files)
        assert parsed.unreadable == 0  # the partly written line was cut off again
        assert len(parsed.final) + held == 36
        assert ledger.held == held  # rows after the disk had room again went to the spool

        await ledger.flush()  # the database takes every row, held ones included
        assert ledger.held == 0 and ledger.accepting
        await ledger.aclose()
    assert await count(db, prefix) == 36
