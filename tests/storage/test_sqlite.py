"""``SQLiteDatabase`` on its own: the file it opens, how sqlite3's errors are classified,
transactions (``executemany``, ``migrate``) and closing."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.storage.base import StorageDataError, StorageError, StorageUnavailable
from gateway.storage.sqlite import SQLiteDatabase

ITEMS = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SQLiteDatabase]:
    handle = SQLiteDatabase(tmp_path / "nested" / "dir" / "t.db")
    await handle.execute(ITEMS)
    yield handle
    await handle.aclose()


async def test_the_file_and_its_directories_are_created_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "t.db"
    db = SQLiteDatabase(path)
    try:
        assert await db.fetch("PRAGMA journal_mode") == [("wal",)]
        assert await db.fetch("PRAGMA busy_timeout") == [(10000,)]
        assert path.is_file()
    finally:
        await db.aclose()


async def test_memory_databases_need_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = SQLiteDatabase(":memory:")
    try:
        await db.execute(ITEMS)
        assert await db.execute("INSERT INTO items (name) VALUES (?)", ("x",)) == 1
        assert await db.fetch("SELECT name FROM items") == [("x",)]
    finally:
        await db.aclose()
    assert os.listdir(tmp_path) == []  # no file, no directory


async def test_rows_come_back_as_tuples_and_execute_counts_changes(db: SQLiteDatabase) -> None:
    await db.executemany("INSERT INTO items (name) VALUES (?)", [("a",), ("b",), ("c",)])
    assert await db.fetch("SELECT id, name FROM items ORDER BY id") == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    assert await db.execute("UPDATE items SET name = name || '!' WHERE id > ?", [1]) == 2
    assert await db.fetch("SELECT name FROM items WHERE id = ?", (3,)) == [("c!",)]


async def test_executemany_is_one_transaction(db: SQLiteDatabase) -> None:
    with pytest.raises(StorageDataError):
        await db.executemany("INSERT INTO items (name) VALUES (?)", [("a",), ("b",), ("a",)])
    assert await db.fetch("SELECT count(*) FROM items") == [(0,)]  # all rolled back
    await db.executemany("INSERT INTO items (name) VALUES (?)", [("a",)])  # usable after
    assert await db.fetch("SELECT name FROM items") == [("a",)]


@pytest.mark.parametrize(
    ("sql", "params", "error"),
    [
        ("SELEC 1", (), StorageError),  # bad SQL
        ("SELECT * FROM missing", (), StorageError),
        ("INSERT INTO items (name) VALUES (NULL)", (), StorageDataError),  # constraint
        ("INSERT INTO items (name) VALUES (?)", ("dup",), StorageDataError),  # unique
        ("INSERT INTO items (name) VALUES (?)", (2**70,), StorageDataError),  # out of range
        ("INSERT INTO items (name) VALUES (?)", (), StorageError),  # the statement's mistake
    ],
    ids=["syntax", "no-table", "not-null", "unique", "int-out-of-range", "missing-param"],
)
async def test_sqlite_errors_are_classified(
    db: SQLiteDatabase, sql: str, params: tuple[object, ...], error: type[StorageError]
) -> None:
    await db.execute("INSERT INTO items (name) VALUES ('dup')")
    with pytest.raises(StorageError) as info:
        await db.execute(sql, params)
    assert type(info.value) is error
    assert str(info.value).startswith("sqlite: ")
    assert isinstance(info.value.__cause__, sqlite3.Error | OverflowError)


async def test_a_full_database_is_unavailable_not_a_data_error(db: SQLiteDatabase) -> None:
    pages = (await db.fetch("PRAGMA page_count"))[0][0]
    await db.fetch(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StorageUnavailable):
        await db.executemany(
            "INSERT INTO items (name) VALUES (?)", [(f"{i:04}" + "x" * 500,) for i in range(200)]
        )


async def test_a_closed_handle_is_unavailable_and_closing_twice_is_fine(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "c.db")
    await db.execute(ITEMS)
    await db.aclose()
    await db.aclose()
    for call in (db.execute("SELECT 1"), db.fetch("SELECT 1"), db.executemany("SELECT 1", [])):
        with pytest.raises(StorageUnavailable):
            await call


MIGRATIONS = [
    ("0001", "items", [ITEMS]),
    (
        "0002",
        "tags",
        ["CREATE TABLE tags (item INTEGER, tag TEXT)", "CREATE INDEX tags_item ON tags (item)"],
    ),
]


async def test_migrations_apply_once_in_order(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "m.db")
    try:
        assert await db.migrate(MIGRATIONS) == ["0001", "0002"]
        assert await db.migrate(MIGRATIONS) == []
        more = [*MIGRATIONS, ("0003", "more", ["ALTER TABLE tags ADD COLUMN weight REAL"])]
        assert await db.migrate(more) == ["0003"]
        rows = await db.fetch("SELECT version, name FROM schema_migrations ORDER BY version")
        assert rows == [("0001", "items"), ("0002", "tags"), ("0003", "more")]
    finally:
        await db.aclose()


async def test_a_failing_migration_is_rolled_back_and_not_recorded(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "m.db")
    broken = [MIGRATIONS[0], ("0002", "broken", ["CREATE TABLE half (x INTEGER)", "NOT SQL"])]
    try:
        with pytest.raises(StorageError):
            await db.migrate(broken)
        assert await db.fetch("SELECT version FROM schema_migrations") == [("0001",)]
        tables = await db.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
        assert ("half",) not in tables  # its first statement was rolled back too
        assert await db.migrate(MIGRATIONS) == ["0002"]  # the fixed one applies later
    finally:
        await db.aclose()


async def test_concurrent_migrators_apply_each_version_once(tmp_path: Path) -> None:
    handles = [SQLiteDatabase(tmp_path / "shared.db") for _ in range(4)]
    try:
        applied = await asyncio.gather(*(h.migrate(MIGRATIONS) for h in handles))
        assert sorted(v for versions in applied for v in versions) == ["0001", "0002"]
        assert await handles[0].fetch("SELECT count(*) FROM schema_migrations") == [(2,)]
    finally:
        for h in handles:
            await h.aclose()


async def test_opening_a_new_file_waits_out_another_workers_write(tmp_path: Path) -> None:
    # Switching a new file to WAL fails at once, busy timeout or not, while another
    # connection (a worker starting beside this one) holds the write lock.
    path = tmp_path / "fresh.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO other VALUES (1)")
    db = SQLiteDatabase(path)
    try:
        migrating = asyncio.ensure_future(db.migrate(MIGRATIONS))
        await asyncio.sleep(0.3)  # long enough for the first switch to be tried
        assert not migrating.done()  # still waiting for the lock, not failed
        holder.execute("COMMIT")
        assert await migrating == ["0001", "0002"]
        assert await db.fetch("PRAGMA journal_mode") == [("wal",)]
    finally:
        holder.close()
        await db.aclose()
