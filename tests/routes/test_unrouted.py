"""What a real ``syntic serve`` answers when no route takes a request as it came: a 405
lists the path's methods in ``Allow`` (RFC 9110), in the unified envelope; a trailing-slash
redirect points at a relative path, whatever ``Host`` the client sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.routes.openapi import openapi_document
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import ScriptedUpstream

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
HOSTILE_HOST = "evil.example"


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, str]]:
    workdir: Path = tmp_path_factory.mktemp("unrouted")
    proc = start_gateway(workdir, [model_table("m", scripted_upstream_server.base_url)])
    try:
        yield proc, proc.create_key("ops", "--admin")
    finally:
        proc.stop()


def auth(gw: tuple[GatewayProcess, str], path: str) -> dict[str, str]:
    """The key a path needs before routing: admin for /admin, customer for /v1."""
    proc, admin_key = gw
    if path.startswith("/admin"):
        return {"authorization": f"Bearer {admin_key}"}
    if path.startswith("/v1/"):
        return {"authorization": f"Bearer {proc.api_key}"}
    return {}


def documented_routes() -> list[tuple[str, list[str]]]:
    """Every documented path (templates filled in) and its methods as ``Allow`` lists
    them: a GET route takes HEAD too."""
    routes = []
    for template, item in openapi_document()["paths"].items():
        path = template.replace("{key_id}", "key_0000000000000000").replace("{asset}", "app.js")
        methods = {m.upper() for m in item}
        if "GET" in methods:
            methods.add("HEAD")
        routes.append((path, sorted(methods)))
    return routes


@pytest.mark.parametrize(("path", "allowed"), documented_routes())
def test_a_wrong_method_gets_405_with_every_method_of_the_path(
    gw: tuple[GatewayProcess, str], path: str, allowed: list[str]
) -> None:
    proc, _ = gw
    for method in (m for m in METHODS if m not in allowed):
        res = httpx.request(method, proc.base_url + path, headers=auth(gw, path), timeout=20)
        assert res.status_code == 405, (method, res.text)
        assert res.headers["allow"] == ", ".join(allowed), method
        if method == "HEAD":
            assert res.content == b""
            continue
        assert res.headers["content-type"] == "application/json"
        envelope = res.json()
        assert envelope["error"]["type"] == "invalid_request_error"
        assert res.headers["x-should-retry"] == "false"
        assert envelope["error"]["code"] == "method_not_allowed"
        assert ", ".join(allowed) in envelope["error"]["message"]
        assert envelope["request_id"] == res.headers["x-request-id"]


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/console/", "/console"),
        ("/console/?tab=usage&x=%2F%2Fevil", "/console?tab=usage&x=%2F%2Fevil"),
        ("/healthz/", "/healthz"),
        ("/v1/models/", "/v1/models"),
        ("/admin/keys/", "/admin/keys"),
    ],
)
def test_a_slash_redirect_is_relative_whatever_the_host(
    gw: tuple[GatewayProcess, str], path: str, location: str
) -> None:
    proc, _ = gw
    for extra in ({"host": HOSTILE_HOST}, {"host": HOSTILE_HOST, "x-forwarded-host": HOSTILE_HOST}):
        res = httpx.get(proc.base_url + path, headers={**auth(gw, path), **extra}, timeout=20)
        assert res.status_code == 307, res.text
        assert res.headers["location"] == location
        assert HOSTILE_HOST not in res.text
    followed = httpx.get(
        proc.base_url + path, headers=auth(gw, path), follow_redirects=True, timeout=20
    )
    assert followed.status_code == 200
    assert str(followed.url) == proc.base_url + location


def test_a_path_with_no_slash_twin_is_a_404_not_a_redirect(
    gw: tuple[GatewayProcess, str],
) -> None:
    proc, _ = gw
    for path in ("//evil.example/", "//evil.example/console/", "/nope/"):
        res = httpx.get(proc.base_url + path, headers={"host": HOSTILE_HOST}, timeout=20)
        assert res.status_code == 404, (path, res.headers.get("location"))
        assert "location" not in res.headers
        assert res.json()["error"]["type"] == "invalid_request_error"
