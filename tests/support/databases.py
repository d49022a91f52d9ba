"""Throwaway real databases for tests (shared by the keys, usage, storage and admin
conftests): PostgreSQL databases on the machine's server (``syntic_t_<random>``, dropped
afterwards) and SQLite files in tmp dirs, migrated or empty.

- ``run_sync(coro)``: run a coroutine on its own loop in a thread (from sync and async
  tests alike).
- ``pg_admin(sql)``: one statement on the server's ``postgres`` database.
- ``migrate(url)``: apply the gateway's migrations.
- ``pg_database(prefix, migrated=...)``: a context manager yielding a fresh database's URL.
- fixtures ``pg_url`` (module: one migrated PostgreSQL database) and ``db_url`` (a migrated
  database of each backend); a conftest imports them to use them.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

from gateway.storage import open_database
from gateway.storage.migrate import apply_migrations

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``coro``'s result, run on its own event loop in a worker thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=60)


async def pg_admin_async(sql: str) -> None:
    """One admin statement (CREATE/DROP DATABASE) on the server's ``postgres`` database."""
    conn = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def pg_admin(sql: str) -> None:
    """``pg_admin_async`` from synchronous code."""
    run_sync(pg_admin_async(sql))


async def migrate_async(url: str) -> None:
    """Apply the gateway's migrations to the database at ``url``."""
    db = open_database(url)
    try:
        await apply_migrations(db)
    finally:
        await db.aclose()


def migrate(url: str) -> None:
    """``migrate_async`` from synchronous code."""
    run_sync(migrate_async(url))


@contextlib.contextmanager
def pg_database(prefix: str = "syntic_t", *, migrated: bool = False) -> Iterator[str]:
    """A new PostgreSQL database (``<prefix>_<random>``), dropped on exit."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    pg_admin(f'CREATE DATABASE "{name}"')
    url = f"{PG_SERVER}/{name}"
    try:
        if migrated:
            migrate(url)
        yield url
    finally:
        pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A migrated PostgreSQL database shared by the module."""
    with pg_database(migrated=True) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database; PostgreSQL is shared by the module (tests use fresh keys)."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    url = f"sqlite:///{tmp_path}/syntic.db"
    migrate(url)
    return url
