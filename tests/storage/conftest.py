"""Real databases for the storage tests: a throwaway PostgreSQL database per module
(``syntic_t_<random>``, dropped afterwards) and SQLite files in tmp dirs."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


async def _admin_async(sql: str) -> None:
    conn = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _admin(sql: str) -> None:
    """Run one admin statement on its own loop in a thread, so it works from sync and
    async tests alike."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _admin_async(sql)).result(timeout=60)


@pytest.fixture(scope="module")
def pg_factory() -> Iterator[Callable[[], str]]:
    """Creates empty PostgreSQL databases; drops them all when the module is done."""
    made: list[str] = []

    def make() -> str:
        name = f"syntic_t_{secrets.token_hex(6)}"
        _admin(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"{PG_SERVER}/{name}"

    yield make
    for name in made:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/db/syntic.db"
    factory: Callable[[], str] = request.getfixturevalue("pg_factory")
    return factory()
