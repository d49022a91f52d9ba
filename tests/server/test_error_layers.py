"""The app's outermost layers: Starlette's own server-error middleware wraps the stack,
and ``GatewayMiddleware`` inside it answers every exception with the unified envelope
first, so the client never sees Starlette's plain-text 500."""

from __future__ import annotations

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.app import create_app
from gateway.settings import Settings


async def boom(request: Request) -> Response:
    raise RuntimeError("secret internal detail")


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_an_endpoints_exception_is_the_500_envelope(method: str) -> None:
    app = create_app(
        Settings(models=()), extra_routes=(Route("/__boom__", boom, methods=["GET", "POST"]),)
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        r = await client.request(method, "/__boom__")
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {
        "error": {
            "type": "server_error",
            "code": "internal_error",
            "message": "Internal server error.",
            "param": None,
        },
        "request_id": r.headers["x-request-id"],
    }
    assert "secret internal detail" not in r.text


async def test_the_router_still_answers_unknown_paths_with_the_envelope() -> None:
    app = create_app(Settings(models=()))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        r = await client.get("/no-such-path")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
