"""Outages of the gateway's own dependencies, on PRIVATE servers started by the
test (stopping the shared ones would break everyone else's tests):

- PostgreSQL down: keys seen recently are still served, unknown keys are refused (503),
  ledger rows are spooled locally and replayed once PostgreSQL is back: every request id
  exactly once, none lost;
- Redis down: requests are served with local limits and the fallback is counted in
  ``/metrics``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.reliability.helpers import chat_body
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.private_services import PrivatePostgres, PrivateRedis
from tests.support.scripted_upstream import Reply, ScriptedUpstream


def _post(gw: GatewayProcess, key: str) -> httpx.Response:
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=chat_body(tools=[]),
        headers={"authorization": f"Bearer {key}"},
        timeout=20,
    )


def _ledger(url: str) -> list[dict[str, Any]]:
    async def fetch() -> list[dict[str, Any]]:
        con = await asyncpg.connect(url, timeout=5)
        try:
            rows = await con.fetch("SELECT request_id, status, error_code FROM usage_records")
            return [dict(r) for r in rows]
        finally:
            await con.close()

    return asyncio.run(fetch())


def _wait_for_ids(url: str, ids: set[str], timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = _ledger(url)
        if ids <= {r["request_id"] for r in rows} or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def test_postgres_outage_serves_cached_keys_and_loses_no_ledger_rows(
    scripted_upstream_server: ScriptedUpstream, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    with PrivatePostgres() as pg:
        data_dir = tmp_path / "data"
        gw = start_gateway(
            tmp_path / "gw",
            [model_table("m", scripted_upstream_server.base_url)],
            env={
                "SYNTIC_DATABASE_URL": pg.url,
                "SYNTIC_DATA_DIR": str(data_dir),
                "SYNTIC_KEY_CACHE_TTL_S": "1",
            },
        )
        try:
            unseen_key = gw.create_key("never-used-before-the-outage")
            upstream.queue(*[Reply(content="ok")] * 40)
            ids: list[str] = []
            before = _post(gw, gw.api_key)  # the key is now cached
            assert before.status_code == 200
            ids.append(before.headers["x-request-id"])

            pg.stop()
            during = [_post(gw, gw.api_key) for _ in range(12)]
            time.sleep(1.2)  # past key_cache_ttl_s: the stale entry must still serve
            during += [_post(gw, gw.api_key) for _ in range(8)]
            assert [r.status_code for r in during] == [200] * 20
            # a real key the gateway has not seen can't be checked: refused (503); a
            # malformed one needs no database to refuse (401)
            refused = [_post(gw, unseen_key), _post(gw, "sk_live_" + "x" * 48)]
            assert [r.status_code for r in refused] == [503, 401]
            assert refused[0].json()["error"]["code"] == "key_store_unavailable"
            ids += [r.headers["x-request-id"] for r in during]
            deadline = time.monotonic() + 10
            while not list(data_dir.glob("usage-*.jsonl")) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert list(data_dir.glob("usage-*.jsonl")), "ledger rows were not spooled"

            pg.start()
            after = _post(gw, gw.api_key)
            assert after.status_code == 200
            ids.append(after.headers["x-request-id"])
            rows = _wait_for_ids(pg.url, set(ids), timeout=20)
        finally:
            gw.stop()
        rows = _ledger(pg.url)  # after a clean stop too
    by_id = [r["request_id"] for r in rows]
    lost = set(ids) - set(by_id)
    assert not lost, f"{len(lost)} ledger rows lost"
    assert len(by_id) == len(set(by_id)), "duplicate ledger rows"
    assert len(rows) >= len(ids)  # the refused requests are recorded too, once spooled
    print(f"PostgreSQL outage: {len(ids)} served requests, 0 rows lost, 0 duplicates")


def test_redis_outage_is_served_with_local_limits_and_counted(
    scripted_upstream_server: ScriptedUpstream, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    with PrivateRedis() as redis:
        gw = start_gateway(
            tmp_path / "gw",
            [model_table("m", scripted_upstream_server.base_url)],
            env={"SYNTIC_REDIS_URL": redis.url},
        )
        try:
            upstream.queue(*[Reply(content="ok")] * 30)
            limited = gw.create_key("limited", "--rpm", "5")
            assert _post(gw, limited).status_code == 200
            redis.stop()
            statuses = [_post(gw, limited).status_code for _ in range(8)]
            # served, and limited locally: the key's 5 rpm still holds in this process
            assert statuses[:4] == [200] * 4 and statuses[-1] == 429, statuses
            metrics = httpx.get(gw.base_url + "/metrics", timeout=5).text
            line = next(
                m for m in metrics.splitlines() if m.startswith("syntic_ratelimit_fail_open_total")
            )
            assert float(line.split()[-1]) >= 1
            # Idempotency claims live in Redis; while it is down a key whose claim can't be
            # checked is refused (503, retry-after) rather than risk a second upstream call
            # from another replica. Requests without the header are still served.
            upstream.reset()
            idem = {"authorization": f"Bearer {gw.api_key}", "idempotency-key": "outage-1"}
            refused = httpx.post(
                gw.base_url + "/v1/chat/completions",
                json=chat_body(tools=[]),
                headers=idem,
                timeout=20,
            )
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "idempotency_unavailable"
            assert refused.headers["retry-after"] == "1"
            assert upstream.requests == []  # no upstream call was made for it
            upstream.queue(Reply(content="once"), Reply(content="plain"))
            redis.start()  # back: the key is served, and replayed
            first, again = (
                httpx.post(
                    gw.base_url + "/v1/chat/completions",
                    json=chat_body(tools=[]),
                    headers=idem,
                    timeout=20,
                )
                for _ in range(2)
            )
            assert first.status_code == again.status_code == 200
            assert again.headers["idempotent-replayed"] == "true"
            assert _post(gw, gw.api_key).status_code == 200
            assert len(upstream.requests) == 2
        finally:
            gw.stop()
