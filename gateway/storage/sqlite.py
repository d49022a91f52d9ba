"""SQLite backend: stdlib ``sqlite3`` on one dedicated thread, WAL mode.

Every call runs on a single worker thread that owns the connection, so the event loop
never blocks on disk I/O and the connection is never shared across threads.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from gateway.storage.base import (
    Dialect,
    Params,
    Row,
    StorageDataError,
    StorageError,
    StorageUnavailable,
)

T = TypeVar("T")

_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version TEXT PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
)

_BUSY_TIMEOUT_MS = 10_000
_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_WAL_RETRY_S = 0.005

# Primary result codes meaning "the file can't be used right now", not "the SQL is wrong".
_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_READONLY,
    }
)

# The values themselves were refused (constraint, out of range, unbindable).
_DATA_ERRORS = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError)

# A bool is bound as the integer it is (1/0) and None as NULL, as sqlite3 does anyway;
# registered, each is found in the adapter table at once. Unregistered (sqlite3 adapts
# every parameter that is not exactly int, float, str or bytearray), it first looks for
# ``__adapt__`` and ``__conform__`` and clears the two AttributeErrors, for each such
# parameter (three or four per ledger row). Process-wide; the stored values are the same.
sqlite3.register_adapter(bool, int)
sqlite3.register_adapter(type(None), lambda _none: None)


class SQLiteDatabase:
    """A SQLite file opened in WAL mode; ``path`` may be ``:memory:``."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="syntic-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._conn = conn
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StorageUnavailable("database handle is closed")

        def call() -> T:
            try:
                return fn(self._connection())
            except OverflowError as exc:  # sqlite3's refusal of an int past 64 bits
                raise StorageDataError(f"sqlite: {exc}") from exc
            except sqlite3.Error as exc:
                code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
                if code in _UNAVAILABLE:
                    raise StorageUnavailable(f"sqlite: {exc}") from exc
                if isinstance(exc, _DATA_ERRORS):
                    raise StorageDataError(f"sqlite: {exc}") from exc
                raise StorageError(f"sqlite: {exc}") from exc

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, call)

    async def execute(self, sql: str, params: Params = ()) -> int:
        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(sql, tuple(params)).rowcount

        return await self._run(op)

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, [tuple(r) for r in rows])
            except BaseException:
                _rollback(conn)
                raise
            conn.execute("COMMIT")

        await self._run(op)

    async def fetch(self, sql: str, params: Params = ()) -> list[Row]:
        def op(conn: sqlite3.Connection) -> list[Row]:
            return [tuple(r) for r in conn.execute(sql, tuple(params)).fetchall()]

        return await self._run(op)

    async def migrate(self, migrations: Sequence[tuple[str, str, Sequence[str]]]) -> list[str]:
        def op(conn: sqlite3.Connection) -> list[str]:
            applied: list[str] = []
            conn.execute(_MIGRATIONS_TABLE)
            for version, name, statements in migrations:
                # BEGIN IMMEDIATE takes the write lock first, so a concurrent migrator
                # waits here and then sees this version as applied.
                conn.execute("BEGIN IMMEDIATE")
                try:
                    done = conn.execute(
                        "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
                    ).fetchone()
                    if done is None:
                        for stmt in statements:
                            conn.execute(stmt)
                        conn.execute(
                            "INSERT INTO schema_migrations (version, name, applied_at)"
                            " VALUES (?, ?, ?)",
                            (version, name, time.time()),
                        )
                        applied.append(version)
                except BaseException:
                    _rollback(conn)
                    raise
                conn.execute("COMMIT")
            return applied

        return await self._run(op)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True

        def close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, close)
        self._pool.shutdown(wait=True)


def _enable_wal(conn: sqlite3.Connection) -> None:
    # Switching the journal mode returns SQLITE_BUSY at once, without the busy handler,
    # while another connection opens or migrates the same file (several workers starting
    # together); retry it for as long as the busy timeout would have waited.
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in _BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(_WAL_RETRY_S)


def _rollback(conn: sqlite3.Connection) -> None:
    # Some errors (SQLITE_FULL, SQLITE_IOERR) end the transaction themselves; a ROLLBACK
    # then would fail and hide the error that matters.
    if conn.in_transaction:
        conn.execute("ROLLBACK")
