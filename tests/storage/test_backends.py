"""Both backends behind one interface, and the boundary translation of driver errors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.storage import StorageError, StorageUnavailable, open_database
from gateway.storage.connect import DatabaseUrlError, data_dir_for, sqlite_path
from gateway.storage.migrate import apply_migrations


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_roundtrip_on_each_backend(empty_db_url: str) -> None:
    db = open_database(empty_db_url)
    try:
        await db.execute(
            "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, ok BOOLEAN, f DOUBLE PRECISION)"
        )
        rows = [(f"r{i}", i, i % 2 == 0, i / 4) for i in range(50)]
        await db.executemany(
            "INSERT INTO t (id, n, ok, f) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING", rows
        )
        # Replaying the same rows changes nothing.
        await db.executemany(
            "INSERT INTO t (id, n, ok, f) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING", rows
        )
        got = await db.fetch("SELECT id, n, ok, f FROM t WHERE n >= ? ORDER BY n", (48,))
        assert [(r[0], r[1], bool(r[2]), r[3]) for r in got] == rows[48:]
        assert await db.execute("UPDATE t SET n = n + 1 WHERE n < ?", (10,)) == 10
        count = await db.fetch("SELECT COUNT(*) FROM t")
        assert count[0][0] == 50
    finally:
        await db.aclose()


async def test_concurrent_queries_share_one_handle(empty_db_url: str) -> None:
    db = open_database(empty_db_url)
    try:
        await apply_migrations(db)
        queries = [db.fetch("SELECT CAST(? AS INTEGER)", (i,)) for i in range(40)]
        results = await asyncio.gather(*queries)
        assert sorted(int(r[0][0]) for r in results) == list(range(40))
    finally:
        await db.aclose()


async def test_bad_sql_is_storage_error_not_unavailable(empty_db_url: str) -> None:
    db = open_database(empty_db_url)
    try:
        with pytest.raises(StorageError) as info:
            await db.fetch("SELECT * FROM no_such_table")
        assert not isinstance(info.value, StorageUnavailable)
    finally:
        await db.aclose()


async def test_postgres_on_dead_port_is_unavailable() -> None:
    db = open_database(f"postgresql://postgres@127.0.0.1:{_dead_port()}/x")
    try:
        with pytest.raises(StorageUnavailable):
            await db.fetch("SELECT 1")
    finally:
        await db.aclose()


async def test_postgres_dropped_database_is_unavailable_then_recovers(
    pg_factory: Callable[[], str],
) -> None:
    import asyncpg

    url = pg_factory()
    name = url.rsplit("/", 1)[1]
    db = open_database(url)
    try:
        assert (await db.fetch("SELECT 1"))[0][0] == 1
        admin = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
        try:
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            with pytest.raises(StorageUnavailable):
                await db.fetch("SELECT 1")
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        assert (await db.fetch("SELECT 2"))[0][0] == 2  # the pool reconnects by itself
    finally:
        await db.aclose()


async def test_sqlite_unopenable_file_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    db = open_database(f"sqlite:///{tmp_path}/adir")  # a directory, not a file
    try:
        with pytest.raises(StorageUnavailable):
            await db.fetch("SELECT 1")
    finally:
        await db.aclose()


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///var/syntic.db", "var/syntic.db"),
        ("sqlite:////abs/x.db", "/abs/x.db"),
        ("sqlite://:memory:", ":memory:"),
    ],
)
def test_sqlite_url_paths(url: str, path: str) -> None:
    assert sqlite_path(url) == path


@pytest.mark.parametrize(
    ("url", "env", "expected"),
    [
        ("sqlite:///var/syntic.db", {}, "var"),
        ("sqlite:////srv/data/s.db", {}, "/srv/data"),
        ("postgresql://h/db", {}, "var"),
        ("postgresql://h/db", {"SYNTIC_DATA_DIR": "/d"}, "/d"),
    ],
)
def test_data_dir(url: str, env: dict[str, str], expected: str) -> None:
    assert str(data_dir_for(url, env)) == expected


def test_unknown_scheme_rejected() -> None:
    with pytest.raises(DatabaseUrlError, match="mysql"):
        open_database("mysql://x/y")


async def test_refused_values_are_data_errors(empty_db_url: str) -> None:
    from gateway.storage import StorageDataError

    db = open_database(empty_db_url)
    try:
        await db.execute("CREATE TABLE d (id TEXT PRIMARY KEY, n INTEGER NOT NULL)")
        await db.execute("INSERT INTO d (id, n) VALUES (?, ?)", ("a", 1))
        for params in [("b", None), ("a", 2)]:  # NOT NULL, then PRIMARY KEY
            with pytest.raises(StorageDataError):
                await db.execute("INSERT INTO d (id, n) VALUES (?, ?)", params)
        with pytest.raises(StorageError) as info:
            await db.execute("INSERT INTO missing (id) VALUES (?)", ("x",))
        assert not isinstance(info.value, StorageDataError)  # schema problem, not the row
    finally:
        await db.aclose()


async def test_sqlite_stores_bools_as_integers_and_none_as_null(tmp_path: Path) -> None:
    """With the registered bool and None adapters values are stored exactly as
    before: a bool as INTEGER 1 or 0 (read back as int), None as NULL."""
    db = open_database(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        await db.execute("CREATE TABLE t (ok BOOLEAN, n INTEGER, s TEXT)")
        await db.executemany(
            "INSERT INTO t (ok, n, s) VALUES (?, ?, ?)", [(True, True, None), (False, 0, "x")]
        )
        got = await db.fetch("SELECT ok, typeof(ok), n, typeof(n), s, typeof(s) FROM t ORDER BY n")
        assert got == [
            (0, "integer", 0, "integer", "x", "text"),
            (1, "integer", 1, "integer", None, "null"),
        ]
        assert all(type(r[0]) is int for r in got)
    finally:
        await db.aclose()
