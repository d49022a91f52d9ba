"""A real ``syntic serve`` for the admin tests, on SQLite and on PostgreSQL, with an admin
key made by ``syntic keys create --admin``; helpers to read the ledger behind its back."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import ScriptedUpstream

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


async def _pg_admin(sql: str) -> None:
    conn = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


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
    pg_name: str | None = None
    db_file: Path | None = workdir / "syntic.db"
    if request.param == "postgresql":
        pg_name = f"syntic_admin_{secrets.token_hex(6)}"
        asyncio.run(_pg_admin(f'CREATE DATABASE "{pg_name}"'))
        env["SYNTIC_DATABASE_URL"] = f"{PG_SERVER}/{pg_name}"
        db_file = None
    gw = start_gateway(
        workdir,
        [
            model_table("admin-model", scripted_upstream_server.base_url),
            model_table("other-model", scripted_upstream_server.base_url),
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
        if pg_name is not None:
            asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)'))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def empty_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated, empty database of each backend, one per module."""
    from gateway.storage import open_database
    from gateway.storage.migrate import apply_migrations

    async def migrate(url: str) -> None:
        db = open_database(url)
        try:
            await apply_migrations(db)
        finally:
            await db.aclose()

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('adminq')}/syntic.db"
        asyncio.run(migrate(url))
        yield url
        return
    name = f"syntic_adminq_{secrets.token_hex(6)}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    url = f"{PG_SERVER}/{name}"
    try:
        asyncio.run(migrate(url))
        yield url
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
