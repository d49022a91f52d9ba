"""The route table and the provider list are the one registrations: what a real
``syntic serve`` serves, where it honours ``Idempotency-Key``, which routes have a metric
label and which adapter module a provider loads all follow from them."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import get_args

import httpx
import pytest
from starlette.routing import Route

from gateway.app import create_app
from gateway.routes.table import ROUTES, RouteSpec, idempotent_paths, metric_paths
from gateway.settings import ModelConfig, Provider, Settings
from gateway.upstream.registry import PROVIDER_MODULES
from tests.ops.helpers import scrape
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import ScriptedUpstream

BAD_IDEMPOTENCY_KEY = "x" * 300


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    proc = start_gateway(
        tmp_path_factory.mktemp("routes"),
        [model_table("m", scripted_upstream_server.base_url)],
        key_name="routes",
    )
    try:
        yield proc
    finally:
        proc.stop()


def test_table_has_no_duplicate_route() -> None:
    pairs = [(s.path, m) for s in ROUTES for m in s.methods]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize("spec", [s for s in ROUTES if "POST" in s.methods], ids=lambda s: s.path)
def test_idempotency_key_is_read_exactly_on_the_tables_idempotent_routes(
    gw: GatewayProcess, spec: RouteSpec
) -> None:
    path = spec.path
    r = httpx.post(
        gw.base_url + path,
        content=b"{}",
        timeout=20,
        headers={
            "authorization": f"Bearer {gw.api_key}",
            "content-type": "application/json",
            "idempotency-key": BAD_IDEMPOTENCY_KEY,
        },
    )
    code = r.json()["error"]["code"] if r.status_code >= 400 else None
    if path in idempotent_paths():
        assert (r.status_code, code) == (400, "invalid_idempotency_key")
    else:
        assert code != "invalid_idempotency_key"


def test_the_app_serves_the_table_and_nothing_else() -> None:
    app = create_app(
        Settings(models=(ModelConfig(name="m", provider="openai", upstream_model="m"),))
    )
    served = {
        (r.path, m)
        for r in app.routes
        if isinstance(r, Route)
        for m in (r.methods or ())
        if m != "HEAD"
    }
    assert served == {(s.path, m) for s in ROUTES for m in s.methods}


def test_metric_labels_follow_the_table(gw: GatewayProcess) -> None:
    assert "/v1/models" in metric_paths() and "/v1/responses/{response_id}" not in metric_paths()
    auth = {"authorization": f"Bearer {gw.api_key}"}
    assert httpx.get(gw.base_url + "/v1/models", headers=auth, timeout=20).status_code == 200
    assert (
        httpx.get(gw.base_url + "/v1/responses/resp_nothere", headers=auth, timeout=20).status_code
        == 404
    )
    routes = {
        dict(labels).get("route")
        for (name, labels) in scrape(gw.base_url)
        if name == "syntic_requests_total"
    }
    assert "/v1/models" in routes and "other" in routes
    assert routes - {"other"} <= metric_paths()


def test_every_provider_has_its_adapter_module() -> None:
    assert set(PROVIDER_MODULES) == set(get_args(Provider))
    for name, module in PROVIDER_MODULES.items():
        assert callable(importlib.import_module(module).create), name
