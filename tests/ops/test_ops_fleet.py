"""A fleet on this machine: three ``syntic serve`` processes on different ports sharing one
PostgreSQL database (keys, ledger) and one Redis (limits). One key works on each replica,
one ledger holds every request, and a key revoked through one replica's CLI is refused by
all of them within the key-cache TTL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.databases import PG_SERVER, pg_database
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Reply, ScriptedUpstream

REDIS = "redis://127.0.0.1:6379/0"
REVOCATION_DEADLINE_S = 2.0 + 3.0  # key_cache_ttl_s plus margin for a loaded machine


def _pg(sql: str, database: str = "postgres", *args: Any) -> list[Any]:
    async def run() -> list[Any]:
        conn = await asyncpg.connect(f"{PG_SERVER}/{database}")
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with pg_database("syntic_ops_fleet") as url:
        yield url.rsplit("/", 1)[1]


@pytest.fixture(scope="module")
def fleet(
    database: str,
    scripted_upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[GatewayProcess]]:
    env = {"SYNTIC_DATABASE_URL": f"{PG_SERVER}/{database}", "SYNTIC_REDIS_URL": REDIS}
    models = [model_table("fleet-model", scripted_upstream_server.base_url)]
    started: list[GatewayProcess] = []
    try:
        for i in range(3):
            workdir = tmp_path_factory.mktemp(f"replica{i}")
            started.append(start_gateway(workdir, models, env=env, key_name=f"replica{i}"))
        yield started
    finally:
        for gw in started:
            gw.stop()


def _chat(gw: GatewayProcess, key: str) -> httpx.Response:
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": "fleet-model", "messages": [{"role": "user", "content": "hi"}]},
        timeout=20,
    )


def _ledger(database: str, request_ids: list[str], timeout: float = 10.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    rows: list[Any] = []
    while time.monotonic() < deadline:
        rows = _pg(
            "SELECT request_id, key_id, status FROM usage_records WHERE request_id = ANY($1)",
            database,
            request_ids,
        )
        if len(rows) == len(request_ids):
            break
        time.sleep(0.1)
    return rows


def test_three_replicas_share_keys_ledger_and_revocation(
    fleet: list[GatewayProcess], database: str, upstream: ScriptedUpstream
) -> None:
    assert len({gw.port for gw in fleet}) == 3
    for gw in fleet:
        ready = httpx.get(gw.base_url + "/readyz", timeout=5).json()
        assert set(ready["checks"]) == {"database", "redis", "models"}
        assert ready["status"] == "ready", ready

    key = fleet[0].create_key("shared")  # created through replica 0's CLI only
    upstream.queue(*(Reply(content=f"answer {i}") for i in range(3)))
    ids = []
    for gw in fleet:
        res = _chat(gw, key)
        assert res.status_code == 200, res.text
        ids.append(res.headers["x-request-id"])

    rows = _ledger(database, ids)
    assert sorted(r["request_id"] for r in rows) == sorted(ids)  # one ledger, every replica
    assert {r["status"] for r in rows} == {200}
    (key_id,) = {r["key_id"] for r in rows}

    fleet[1].syntic("keys", "revoke", key_id)  # revoked through replica 1's CLI
    deadline = time.monotonic() + REVOCATION_DEADLINE_S
    refused: dict[int, float] = {}
    while len(refused) < 3 and time.monotonic() < deadline:
        for i, gw in enumerate(fleet):
            if i not in refused:
                res = httpx.get(
                    gw.base_url + "/v1/models",
                    headers={"authorization": f"Bearer {key}"},
                    timeout=5,
                )
                if res.status_code == 401:
                    refused[i] = time.monotonic()
                else:
                    assert res.status_code == 200
        time.sleep(0.1)
    assert sorted(refused) == [0, 1, 2], "a replica still accepts the revoked key"
    # the replicas' own keys are untouched
    for gw in fleet:
        ok = httpx.get(
            gw.base_url + "/v1/models", headers={"authorization": f"Bearer {gw.api_key}"}, timeout=5
        )
        assert ok.status_code == 200
