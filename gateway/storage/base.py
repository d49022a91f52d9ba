"""The one small interface both database backends implement.

SQL is written once with ``?`` placeholders; the PostgreSQL backend rewrites them to
``$1, $2, ...``. Rows come back as plain tuples in column order. Driver exceptions are
translated here, at the boundary: ``StorageUnavailable`` when the database cannot be
reached (callers degrade: cached keys, spooled ledger rows), ``StorageDataError`` when it
refuses the values themselves, ``StorageError`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

Row = tuple[Any, ...]
Params = Sequence[Any]
Dialect = Literal["sqlite", "postgresql"]


class StorageError(Exception):
    """A database operation failed (bad SQL, constraint, or unreachable database)."""


class StorageUnavailable(StorageError):
    """The database cannot be reached right now; retrying later may succeed."""


class StorageDataError(StorageError):
    """The database refused these values (bad type, out of range, constraint): retrying
    the same row will fail again, unlike a missing table or a lost connection."""


class Database(Protocol):
    """An async handle on one database. Safe to share across tasks."""

    dialect: Dialect

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; return the number of rows it changed (best effort)."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement for each parameter row, in a single transaction."""
        ...

    async def fetch(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return all its rows."""
        ...

    async def migrate(self, migrations: Sequence[tuple[str, str, Sequence[str]]]) -> list[str]:
        """Apply the not-yet-applied migrations ``(version, name, statements)`` in order,
        each in its own transaction, while holding a cross-process lock (an advisory lock
        on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), recording each in
        ``schema_migrations``. Returns the versions applied by this call."""
        ...

    async def aclose(self) -> None:
        """Close connections; the handle is unusable afterwards."""
        ...
