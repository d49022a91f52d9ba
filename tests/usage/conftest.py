"""A migrated database of each backend: SQLite in a tmp dir, and a throwaway PostgreSQL
database per module (``syntic_t_<random>``, dropped afterwards)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest

from gateway.storage import open_database
from gateway.storage.migrate import apply_migrations

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


async def _admin_async(sql: str) -> None:
    conn = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _migrate(url: str) -> None:
    db = open_database(url)
    try:
        await apply_migrations(db)
    finally:
        await db.aclose()


def _sync(coro: object) -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coro).result(timeout=60)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    name = f"syntic_t_{secrets.token_hex(6)}"
    _sync(_admin_async(f'CREATE DATABASE "{name}"'))
    url = f"{PG_SERVER}/{name}"
    _sync(_migrate(url))
    yield url
    _sync(_admin_async(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database; PostgreSQL is shared by the module (tests use fresh keys)."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    url = f"sqlite:///{tmp_path}/syntic.db"
    _sync(_migrate(url))
    return url
