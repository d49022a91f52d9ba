"""Real databases for the storage tests: a throwaway PostgreSQL database per module
(``syntic_t_<random>``, dropped afterwards) and SQLite files in tmp dirs."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.databases import PG_SERVER, pg_admin


@pytest.fixture(scope="module")
def pg_factory() -> Iterator[Callable[[], str]]:
    """Creates empty PostgreSQL databases; drops them all when the module is done."""
    made: list[str] = []

    def make() -> str:
        name = f"syntic_t_{secrets.token_hex(6)}"
        pg_admin(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"{PG_SERVER}/{name}"

    yield make
    for name in made:
        pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/db/syntic.db"
    factory: Callable[[], str] = request.getfixturevalue("pg_factory")
    return factory()
