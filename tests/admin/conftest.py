"""A real ``syntic serve`` for the admin tests, on SQLite and on PostgreSQL, with an admin
key made by ``syntic keys create --admin``; helpers to read the ledger behind its back."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.databases import migrate, pg_database
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import ScriptedUpstream


@dataclass
class AdminGateway:
    """A running gateway, its admin key, and where its ledger lives."""

    gw: GatewayProcess
    admin_key: str
    database_url: str
    db_file: Path | None

    @property
    def base_url(self) -> str:
        return self.gw.base_url

    @property
    def admin(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.admin_key}"}

    @property
    def customer(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.gw.api_key}"}

    def ledger_rows(self, key_id: str) -> list[dict[str, Any]]:
        """Every ``usage_records`` row of ``key_id``, read straight from the database."""
        sql = "SELECT * FROM usage_records WHERE key_id = "
        if self.db_file is not None:
            conn = sqlite3.connect(self.db_file)
            conn.row_factory = sqlite3.Row
            try:
                return [dict(r) for r in conn.execute(sql + "?", (key_id,)).fetchall()]
            finally:
                conn.close()

        async def fetch() -> list[dict[str, Any]]:
            conn = await asyncpg.connect(self.database_url)
            try:
                return [dict(r) for r in await conn.fetch(sql + "$1", key_id)]
            finally:
                await conn.close()

        return asyncio.run(fetch())


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def admin_gw(
    request: pytest.FixtureRequest,
    scripted_upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AdminGateway]:
    workdir = tmp_path_factory.mktemp(f"admin-{request.param}")
    env: dict[str, str] = {}
    db_file: Path | None = workdir / "syntic.db"
    with contextlib.ExitStack() as stack:
        if request.param == "postgresql":
            env["SYNTIC_DATABASE_URL"] = stack.enter_context(pg_database("syntic_admin"))
            db_file = None
        yield from _admin_gateway(workdir, scripted_upstream_server, env, db_file)


def _admin_gateway(
    workdir: Path, upstream: ScriptedUpstream, env: dict[str, str], db_file: Path | None
) -> Iterator[AdminGateway]:
    gw = start_gateway(
        workdir,
        [
            model_table("admin-model", upstream.base_url),
            model_table("other-model", upstream.base_url),
        ],
        env=env,
        key_name="customer",
    )
    try:
        out = gw.syntic("keys", "create", "--name", "ops", "--admin")
        admin_key = out.stdout.strip().splitlines()[-1].strip()
        url = gw.env["SYNTIC_DATABASE_URL"]
        yield AdminGateway(gw, admin_key, url, db_file)
    finally:
        gw.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def empty_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated, empty database of each backend, one per module."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('adminq')}/syntic.db"
        migrate(url)
        yield url
        return
    with pg_database("syntic_adminq", migrated=True) as url:
        yield url
