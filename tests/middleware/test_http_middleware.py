"""GatewayMiddleware and AuthMiddleware as plain ASGI, driven through httpx.ASGITransport."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from gateway.errors import GatewayError, RateLimited
from gateway.keys.base import Principal
from gateway.middleware.auth import AuthMiddleware, presented_key
from gateway.middleware.envelope import GatewayMiddleware
from gateway.usage.base import UsageRecord
from gateway.web import JsonResponse, request_context


class RecordingLedger:
    def __init__(self) -> None:
        self.records: list[UsageRecord] = []
        self.accepting = True

    def record(self, record: UsageRecord) -> None:
        self.records.append(record)

    def started(self, record: UsageRecord) -> None:
        pass


class OneKey:
    def cached(self, secret: str) -> tuple[bool, Principal | None]:
        return False, None  # always the awaited path here; DbKeyStore tests cover both

    async def authenticate(self, secret: str) -> Principal | None:
        if secret == "admin":
            return Principal(key_id="key_admin", name="ops", admin=True)
        return Principal(key_id="key_1", name="t") if secret == "good" else None


async def inner(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the body, then behaves as the path says."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    if path.endswith("/boom"):
        raise RuntimeError("secret internal detail")
    if path.endswith("/limited"):
        raise RateLimited("slow down", headers={"retry-after": "7"})
    ctx = request_context(scope)
    ctx.enforced = True
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        }
    )
    await send({"type": "http.response.body", "body": str(len(body)).encode()})


@pytest.fixture
def ledger() -> RecordingLedger:
    return RecordingLedger()


@pytest.fixture
async def client(ledger: RecordingLedger) -> AsyncIterator[httpx.AsyncClient]:
    app = GatewayMiddleware(
        AuthMiddleware(inner, keys=OneKey), max_body_bytes=100, ledger=lambda: ledger
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
        yield c


AUTH = {"authorization": "Bearer good"}


async def test_success_headers_and_ledger(
    client: httpx.AsyncClient, ledger: RecordingLedger
) -> None:
    r = await client.post("/v1/echo", content=b"x" * 10, headers=AUTH)
    assert (r.status_code, r.text) == (200, "10")
    assert r.headers["x-request-id"].startswith("req_")
    assert r.headers["x-syntic-schema-retries"] == "0"
    [rec] = ledger.records
    assert (rec.request_id, rec.status, rec.key_id) == (r.headers["x-request-id"], 200, "key_1")


async def test_request_ids_are_unique_and_time_ordered(client: httpx.AsyncClient) -> None:
    """``req_`` + 12 hex digits of milliseconds + 16 random: unique, and sorted by time
    (the ledger's primary key then grows at its end)."""
    ids: list[str] = []
    for i in range(60):
        r = await client.post("/v1/echo", content=b"x", headers=AUTH)
        ids.append(r.headers["x-request-id"])
        if i % 20 == 19:
            await asyncio.sleep(0.003)  # the next id is in a later millisecond
    assert all(re.fullmatch(r"req_[0-9a-f]{28}", i) for i in ids), ids[:3]
    assert len(set(ids)) == len(ids)
    ms = [int(i[4:16], 16) for i in ids]
    assert ms == sorted(ms)
    assert ms[20] > ms[19] and ms[40] > ms[39]
    assert abs(ms[-1] / 1000 - time.time()) < 60
    assert len({i[16:] for i in ids}) == len(ids)  # the random part differs too


async def test_unhandled_exception_is_500_envelope(
    client: httpx.AsyncClient, ledger: RecordingLedger
) -> None:
    r = await client.post("/v1/boom", headers=AUTH)
    assert r.status_code == 500
    assert r.json() == {
        "error": {
            "type": "server_error",
            "code": "internal_error",
            "message": "Internal server error.",
            "param": None,
        },
        "request_id": r.headers["x-request-id"],
    }
    assert "secret internal detail" not in r.text and "Traceback" not in r.text
    assert (ledger.records[0].status, ledger.records[0].error_code) == (500, "internal_error")


async def test_gateway_error_headers(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/limited", headers=AUTH)
    assert (r.status_code, r.headers["retry-after"]) == (429, "7")
    assert r.json()["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize("chunked", [False, True])
async def test_body_cap(client: httpx.AsyncClient, ledger: RecordingLedger, chunked: bool) -> None:
    async def gen() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"y" * 30

    content = gen() if chunked else b"y" * 150
    r = await client.post("/v1/echo", content=content, headers=AUTH)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"
    assert ledger.records[0].status == 413


async def test_auth_failure_recorded_without_key(
    client: httpx.AsyncClient, ledger: RecordingLedger
) -> None:
    r = await client.post("/v1/echo", headers={"authorization": "Bearer bad"})
    assert r.status_code == 401
    assert (ledger.records[0].key_id, ledger.records[0].error_code) == (None, "invalid_api_key")


async def test_admin_key_refused_on_v1(client: httpx.AsyncClient, ledger: RecordingLedger) -> None:
    r = await client.post("/v1/echo", headers={"authorization": "Bearer admin"})
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "permission_denied"
    assert ledger.records[0].error_code == "permission_denied"


async def test_non_v1_paths_skip_auth_and_ledger(
    client: httpx.AsyncClient, ledger: RecordingLedger
) -> None:
    r = await client.get("/healthz")
    assert r.status_code == 200 and ledger.records == []


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ([(b"authorization", b"Bearer sk_1")], "sk_1"),
        ([(b"authorization", b"bearer  sk_2 ")], "sk_2"),
        ([(b"x-api-key", b"sk_3")], "sk_3"),
        ([(b"x-api-key", b"sk_3"), (b"authorization", b"Bearer sk_4")], "sk_4"),
        ([(b"authorization", b"Basic abc")], None),
        ([], None),
    ],
)
def test_presented_key(headers: list[tuple[bytes, bytes]], key: str | None) -> None:
    assert presented_key(headers) == key


def test_gateway_error_default_is_500() -> None:
    assert GatewayError("x").status == 500


@pytest.mark.parametrize("body", [b"", b'{"a":1}', '{"é":"ü"}'.encode() * 300])
async def test_json_response_sends_what_starlette_response_sends(body: bytes) -> None:
    """``JsonResponse`` (the chat endpoints' 200) must put the same ASGI messages on
    the wire as ``Response(body, media_type="application/json")``."""

    async def sent(response: Response) -> list[Message]:
        out: list[Message] = []

        async def send(message: Message) -> None:
            out.append(message)

        async def receive() -> Message:
            raise AssertionError("a response never reads the request")

        await response({"type": "http", "method": "POST"}, receive, send)
        return out

    assert await sent(JsonResponse(body)) == await sent(
        Response(body, media_type="application/json")
    )
