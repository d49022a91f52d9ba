"""``/readyz`` against the real PostgreSQL and Redis, and against unreachable ones.

Unreachable means a dead loopback port or an unknown database: the shared services the
other tests use are never stopped.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from gateway.settings import ModelConfig, Settings
from tests.ops.helpers import scrape
from tests.support.gateway_proc import InProcessGateway, free_port

PG = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"
MODEL = ModelConfig(
    name="m", provider="openai", upstream_model="m", base_url="http://127.0.0.1:9/v1"
)


def _settings(tmp_path: Path, database_url: str, redis_url: str | None, models: bool) -> Settings:
    return Settings(
        models=(MODEL,) if models else (),
        database_url=database_url,
        redis_url=redis_url,
        env={"SYNTIC_DATA_DIR": str(tmp_path)},
    )


def _dead() -> str:
    return str(free_port())  # bound then released: nothing listens there


@pytest.mark.parametrize(
    ("database", "redis", "models", "failing", "degraded"),
    [
        ("pg", None, True, set(), set()),
        ("pg", "redis", True, set(), set()),
        ("sqlite", None, True, set(), set()),
        ("pg-dead-port", None, True, {"database"}, set()),
        ("pg-unknown-db", None, True, {"database"}, set()),
        # Redis down is not fatal: limits fall back per process, the replica keeps serving
        ("pg", "redis-dead-port", True, set(), {"redis"}),
        ("pg-dead-port", "redis-dead-port", True, {"database"}, {"redis"}),
        ("sqlite", None, False, {"models"}, set()),
    ],
)
def test_readyz(
    tmp_path: Path,
    database: str,
    redis: str | None,
    models: bool,
    failing: set[str],
    degraded: set[str],
) -> None:
    urls = {
        "pg": PG,
        "sqlite": f"sqlite:///{tmp_path / 'ready.db'}",
        "pg-dead-port": f"postgresql://postgres@127.0.0.1:{_dead()}/test",
        "pg-unknown-db": "postgresql://postgres@127.0.0.1:5432/syntic_ops_no_such_database",
        "redis": REDIS,
        "redis-dead-port": f"redis://127.0.0.1:{_dead()}/0",
    }
    settings = _settings(tmp_path, urls[database], urls[redis] if redis else None, models)
    with InProcessGateway(create_app(settings)) as gw:
        res = httpx.get(gw.base_url + "/readyz", timeout=10)
        health = httpx.get(gw.base_url + "/healthz", timeout=10)
        metrics = scrape(gw.base_url)
    body = res.json()
    assert health.status_code == 200  # alive even when not ready
    assert res.status_code == (503 if failing else 200), body
    assert body["status"] == ("unavailable" if failing else "ready")
    assert {name for name, c in body["checks"].items() if not c["ok"]} == failing | degraded
    expected_checks = {"database", "models"} | ({"redis"} if redis else set())
    assert set(body["checks"]) == expected_checks
    assert len(body["reasons"]) == len(failing)
    assert len(body["degraded"]) == len(degraded)
    if redis:
        assert body["redis"] == ("degraded" if degraded else "ok")
        assert metrics[("syntic_redis_up", ())] == (0 if degraded else 1)
    else:
        assert "redis" not in body
        assert ("syntic_redis_up", ()) not in metrics
    for reason in body["reasons"] + body["degraded"]:
        assert "postgres@" not in reason and "127.0.0.1" not in reason  # no URLs leak
