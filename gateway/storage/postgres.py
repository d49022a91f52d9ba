"""PostgreSQL backend on an asyncpg pool.

The pool starts empty (``min_size=0``) and connects on first use, so a gateway can start
while PostgreSQL is down and recovers by itself once it is back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import asyncpg

from gateway.storage.base import (
    Dialect,
    Params,
    Row,
    StorageDataError,
    StorageError,
    StorageUnavailable,
)

# pg_advisory_lock key shared by every `syntic migrate` (an arbitrary constant: "SYNT").
MIGRATION_LOCK_KEY = 0x53594E54

_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version TEXT PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
)

# SQLSTATE classes meaning "can't reach / use the database right now".
_UNAVAILABLE_CLASSES = ("08", "53", "57", "3D")


def to_dollar_params(sql: str) -> str:
    """Rewrite ``?`` placeholders (outside string literals) to ``$1, $2, ...``."""
    out: list[str] = []
    n = 0
    in_quote = False
    for ch in sql:
        if ch == "'":
            in_quote = not in_quote
        if ch == "?" and not in_quote:
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out)


def _translate(exc: BaseException) -> StorageError:
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, "sqlstate", "") or "")
        if state[:2] in _UNAVAILABLE_CLASSES:
            return StorageUnavailable(f"postgresql: {exc}")
        if state[:2] in ("22", "23"):  # data exception, integrity constraint violation
            return StorageDataError(f"postgresql: {exc}")
        return StorageError(f"postgresql: {exc}")
    if isinstance(exc, asyncpg.exceptions.DataError):  # client-side encoding of a value
        return StorageDataError(f"postgresql: {exc}")
    return StorageUnavailable(f"postgresql: {type(exc).__name__}: {exc}")


_CONNECTION_ERRORS = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresError,
)


class PostgresDatabase:
    """A lazily connected asyncpg pool for ``postgresql://`` URLs."""

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, *, max_size: int = 10, connect_timeout_s: float = 2.0) -> None:
        self.url = url
        self._max_size = max_size
        self._connect_timeout_s = connect_timeout_s
        self._pool: Any = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def _get_pool(self) -> Any:
        if self._closed:
            raise StorageUnavailable("database handle is closed")
        if self._pool is None:
            async with self._lock:
                if self._pool is None:
                    try:
                        self._pool = await asyncpg.create_pool(
                            self.url,
                            min_size=0,
                            max_size=self._max_size,
                            timeout=self._connect_timeout_s,
                            command_timeout=30,
                        )
                    except _CONNECTION_ERRORS as exc:
                        raise _translate(exc) from exc
        return self._pool

    async def execute(self, sql: str, params: Params = ()) -> int:
        pool = await self._get_pool()
        try:
            status: str = await pool.execute(to_dollar_params(sql), *params)
        except _CONNECTION_ERRORS as exc:
            raise _translate(exc) from exc
        tail = status.rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        pool = await self._get_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.executemany(to_dollar_params(sql), [tuple(r) for r in rows])
        except _CONNECTION_ERRORS as exc:
            raise _translate(exc) from exc

    async def fetch(self, sql: str, params: Params = ()) -> list[Row]:
        pool = await self._get_pool()
        try:
            records = await pool.fetch(to_dollar_params(sql), *params)
        except _CONNECTION_ERRORS as exc:
            raise _translate(exc) from exc
        return [tuple(r.values()) for r in records]

    async def migrate(self, migrations: Sequence[tuple[str, str, Sequence[str]]]) -> list[str]:
        pool = await self._get_pool()
        applied: list[str] = []
        try:
            async with pool.acquire() as conn:
                # Session-level advisory lock: a second migrator blocks here until the
                # first finishes, then finds every version already recorded.
                await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
                try:
                    await conn.execute(_MIGRATIONS_TABLE)
                    for version, name, statements in migrations:
                        async with conn.transaction():
                            done = await conn.fetchval(
                                "SELECT 1 FROM schema_migrations WHERE version = $1", version
                            )
                            if done is not None:
                                continue
                            for stmt in statements:
                                await conn.execute(stmt)
                            await conn.execute(
                                "INSERT INTO schema_migrations (version, name, applied_at)"
                                " VALUES ($1, $2, $3)",
                                version,
                                name,
                                time.time(),
                            )
                            applied.append(version)
                finally:
                    await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        except _CONNECTION_ERRORS as exc:
            raise _translate(exc) from exc
        return applied

    async def aclose(self) -> None:
        self._closed = True
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), timeout=5)
            except (TimeoutError, *_CONNECTION_ERRORS):
                pool.terminate()
