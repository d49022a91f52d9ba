"""The admin API against a real ``syntic serve`` (SQLite and PostgreSQL).

Admin keys only (401 without/with a bad key, 403 with a customer key, on every route);
keys created through the API work at once and stop when revoked; usage aggregates equal
the ledger rows the test created, read straight from the database; no prompt text leaks.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from gateway.routes.openapi import openapi_document
from tests.admin.conftest import AdminGateway
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"amount_pence": {"type": "integer", "minimum": 1}},
    "required": ["amount_pence"],
    "additionalProperties": False,
}
TOOL = {"type": "function", "function": {"name": "refund", "strict": True, "parameters": SCHEMA}}
NON_STRICT = {"type": "object", "properties": {"a": {"type": "string"}}}

# Every admin operation, with a body where it takes one (a path id that need not exist:
# authentication comes before anything else).
ADMIN_CALLS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/admin/keys", None),
    ("POST", "/admin/keys", {"name": "x"}),
    ("DELETE", "/admin/keys/key_0000000000000000", None),
    ("GET", "/admin/usage", None),
    ("GET", "/admin/requests", None),
    ("POST", "/admin/schemas/check", {"tools": [TOOL]}),
    ("GET", "/admin/no-such-route", None),
]


def call(
    gw: AdminGateway,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: Any = None,
    **params: Any,
) -> httpx.Response:
    return httpx.request(
        method,
        gw.base_url + path,
        headers=headers or {},
        json=body,
        params={k: v for k, v in params.items() if v is not None},
        timeout=20,
    )


def chat(
    gw: AdminGateway,
    key: str,
    model: str = "admin-model",
    text: str = "refund it",
    tools: list[Any] | None = None,
) -> httpx.Response:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "tools": [TOOL] if tools is None else tools,
    }
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=body,
        timeout=20,
        headers={"authorization": f"Bearer {key}"},
    )


def create_key(gw: AdminGateway, name: str, **extra: Any) -> dict[str, Any]:
    res = call(gw, "POST", "/admin/keys", gw.admin, {"name": name, **extra})
    assert res.status_code == 201, res.text
    created: dict[str, Any] = res.json()
    return created


def wait_for_rows(gw: AdminGateway, key_id: str, n: int, timeout: float = 10.0) -> list[Any]:
    """Poll /admin/requests until the ledger writer has flushed ``n`` rows for the key."""
    deadline = time.monotonic() + timeout
    rows: list[Any] = []
    while time.monotonic() < deadline:
        rows = call(gw, "GET", "/admin/requests", gw.admin, key_id=key_id).json()["data"]
        if len(rows) >= n:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"ledger has {len(rows)} of {n} rows for {key_id}")


def test_every_documented_admin_route_is_exercised() -> None:
    documented = {
        (method.upper(), path)
        for path, item in openapi_document()["paths"].items()
        if path.startswith("/admin/")
        for method in item
    }
    exercised = {(m, p.replace("key_0000000000000000", "{key_id}")) for m, p, _ in ADMIN_CALLS}
    assert documented <= exercised


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS)
def test_admin_routes_need_an_admin_key(
    admin_gw: AdminGateway, method: str, path: str, body: dict[str, Any] | None
) -> None:
    bad = "sk_admin_" + "A" * 49
    cases = [
        ({}, 401, "missing_api_key"),
        ({"authorization": f"Bearer {bad}"}, 401, "invalid_api_key"),
        (admin_gw.customer, 403, "permission_denied"),
        ({"x-api-key": admin_gw.gw.api_key}, 403, "permission_denied"),
    ]
    for headers, status, code in cases:
        res = call(admin_gw, method, path, headers, body)
        assert res.status_code == status, (headers.keys(), res.text)
        envelope = res.json()
        assert envelope["error"]["code"] == code
        assert envelope["request_id"] == res.headers["x-request-id"]
        assert set(envelope["error"]) == {"type", "code", "message", "param"}


def test_created_key_works_at_once_and_stops_after_revoke(
    admin_gw: AdminGateway, upstream: ScriptedUpstream
) -> None:
    created = create_key(admin_gw, "fresh", rpm=600, tpm=100000)
    key, secret = created["key"], created["secret"]
    assert secret.startswith("sk_live_") and (key["rpm"], key["tpm"]) == (600, 100000)
    upstream.queue(Reply(tool_calls=[Call("refund", '{"amount_pence": 5}')]))
    assert chat(admin_gw, secret).status_code == 200  # at once: no cache warm-up needed

    listed = call(admin_gw, "GET", "/admin/keys", admin_gw.admin)
    assert secret not in listed.text
    (mine,) = [k for k in listed.json()["data"] if k["id"] == key["id"]]
    assert mine["display_prefix"] == secret[: len(mine["display_prefix"])]
    assert not mine["revoked"]

    res = call(admin_gw, "DELETE", f"/admin/keys/{key['id']}", admin_gw.admin)
    assert res.status_code == 200 and res.json()["key"]["revoked"] is True
    deadline = time.monotonic() + res.json()["propagation_s"] + 1.0
    while (refused := chat(admin_gw, secret)).status_code != 401:
        assert time.monotonic() < deadline, "revoked key still accepted after the cache TTL"
        time.sleep(0.1)
    assert refused.json()["error"]["code"] == "invalid_api_key"
    again = call(admin_gw, "DELETE", f"/admin/keys/{key['id']}", admin_gw.admin)
    assert again.status_code == 200 and again.json()["already_revoked"] is True
    active = call(admin_gw, "GET", "/admin/keys", admin_gw.admin, include_revoked="false")
    assert key["id"] not in {k["id"] for k in active.json()["data"]}


def test_test_keys_and_admin_keys_through_the_api(admin_gw: AdminGateway) -> None:
    created = create_key(admin_gw, "sandbox", test=True)
    assert created["secret"].startswith("sk_test_") and created["key"]["kind"] == "test"
    admins = [
        k for k in call(admin_gw, "GET", "/admin/keys", admin_gw.admin).json()["data"] if k["admin"]
    ]
    assert admins, "the fixture's admin key is listed"
    res = call(admin_gw, "DELETE", f"/admin/keys/{admins[0]['id']}", admin_gw.admin)
    assert (res.status_code, res.json()["error"]["code"]) == (400, "admin_key_not_managed")


@pytest.mark.parametrize(
    ("method", "path", "body", "params", "status", "param"),
    [
        ("POST", "/admin/keys", {"name": ""}, {}, 400, "name"),
        ("POST", "/admin/keys", {"name": "n", "rpm": 0}, {}, 400, "rpm"),
        ("POST", "/admin/keys", {"name": "n", "tpm": "9"}, {}, 400, "tpm"),
        ("POST", "/admin/keys", {"name": "n", "test": "yes"}, {}, 400, "test"),
        ("POST", "/admin/keys", [1], {}, 400, "body"),
        ("DELETE", "/admin/keys/key_nope", None, {}, 404, "key_id"),
        ("GET", "/admin/usage", None, {"bucket": "7m"}, 400, "bucket"),
        ("GET", "/admin/usage", None, {"since": "-30d", "bucket": "1m"}, 400, "bucket"),
        ("GET", "/admin/usage", None, {"since": "-1h", "until": "-2h"}, 400, "since"),
        ("GET", "/admin/usage", None, {"since": "yesterday"}, 400, "since"),
        ("GET", "/admin/requests", None, {"limit": "0"}, 400, "limit"),
        ("GET", "/admin/requests", None, {"status": "abc"}, 400, "status"),
    ],
)
def test_bad_admin_requests_get_an_envelope_naming_the_param(
    admin_gw: AdminGateway,
    method: str,
    path: str,
    body: Any,
    params: dict[str, str],
    status: int,
    param: str,
) -> None:
    res = call(admin_gw, method, path, admin_gw.admin, body, **params)
    assert res.status_code == status, res.text
    assert res.json()["error"]["param"] == param


AGG_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "correction_prompt_tokens",
    "correction_completion_tokens",
    "schema_retries",
    "upstream_calls",
)


def expected(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {f: sum(int(r[f]) for r in rows) for f in AGG_FIELDS}
    out["requests"] = len(rows)
    out["unprocessable_422"] = sum(1 for r in rows if r["status"] == 422)
    out["errors_4xx"] = sum(1 for r in rows if 400 <= r["status"] < 500)
    out["corrected_requests"] = sum(1 for r in rows if r["schema_retries"] > 0)
    return out


def test_usage_aggregates_match_the_ledger_rows(
    admin_gw: AdminGateway, upstream: ScriptedUpstream
) -> None:
    secret = (created := create_key(admin_gw, "billing"))["secret"]
    key_id = created["key"]["id"]
    ok = Reply(tool_calls=[Call("refund", '{"amount_pence": 5}')], usage=(11, 4))
    bad = Reply(tool_calls=[Call("refund", '{"amount_pence": "5"}')], usage=(13, 6))
    fixed = Reply(tool_calls=[Call("refund", '{"amount_pence": 5}')], usage=(30, 7))
    upstream.queue(ok, ok, bad, fixed, bad, bad, ok)
    statuses = [chat(admin_gw, secret).status_code for _ in range(4)]
    statuses.append(chat(admin_gw, secret, model="other-model").status_code)
    statuses.append(chat(admin_gw, secret, model="no-such-model").status_code)
    assert statuses == [200, 200, 200, 422, 200, 404]

    rows = wait_for_rows(admin_gw, key_id, len(statuses))
    db_rows = admin_gw.ledger_rows(key_id)
    assert sorted(r["request_id"] for r in rows) == sorted(r["request_id"] for r in db_rows)

    report = call(
        admin_gw, "GET", "/admin/usage", admin_gw.admin, key_id=key_id, since="-1h", bucket="5m"
    ).json()
    want = expected(db_rows)
    assert {k: report["totals"][k] for k in want} == want
    assert (want["requests"], want["unprocessable_422"], want["corrected_requests"]) == (6, 1, 2)
    assert want["correction_prompt_tokens"] == 30 + 13  # the fix, and the failed correction
    totals = report["totals"]
    assert totals["first_attempt_tokens"] == want["prompt_tokens"] + want["completion_tokens"]
    assert totals["correction_rate"] == pytest.approx(2 / 6)
    assert totals["unprocessable_rate"] == pytest.approx(1 / 6)

    by_model = {r["model"]: r["requests"] for r in report["by_model"]}
    assert by_model == dict(Counter(r["model"] for r in db_rows))
    by_status = {r["status"]: r["requests"] for r in report["by_status"]}
    assert by_status == dict(Counter(r["status"] for r in db_rows))
    by_code = {r["error_code"]: r["requests"] for r in report["by_error_code"]}
    assert by_code == dict(Counter(r["error_code"] for r in db_rows))
    assert [r["key_id"] for r in report["by_key"]] == [key_id]
    for name in ("total", "by_model", "by_key"):
        series = report["series"][name]
        assert sum(p["requests"] for p in series) == 6
        assert sum(p["correction_tokens"] for p in series) == totals["correction_tokens"]
        assert all(p["t"] % 300 == 0 for p in series)

    only = call(
        admin_gw,
        "GET",
        "/admin/usage",
        admin_gw.admin,
        key_id=key_id,
        model="other-model",
        since="-1h",
    ).json()
    assert only["totals"]["requests"] == 1 and only["totals"]["prompt_tokens"] == 11


def test_requests_list_filters_and_holds_no_prompt(
    admin_gw: AdminGateway, upstream: ScriptedUpstream
) -> None:
    secret = (created := create_key(admin_gw, "private"))["secret"]
    key_id = created["key"]["id"]
    marker = "confidential-" + secrets.token_hex(8)
    upstream.queue(
        Reply(content=marker, tool_calls=[Call("refund", '{"amount_pence": 5}')]),
        Reply(tool_calls=[Call("refund", '{"amount_pence": "x"}')]),
        Reply(tool_calls=[Call("refund", '{"amount_pence": "y"}')]),
    )
    assert chat(admin_gw, secret, text=marker).status_code == 200
    assert chat(admin_gw, secret, text=marker).status_code == 422
    rows = wait_for_rows(admin_gw, key_id, 2)
    assert [r["status"] for r in rows] == [422, 200]  # newest first
    listing = call(admin_gw, "GET", "/admin/requests", admin_gw.admin, key_id=key_id)
    usage = call(admin_gw, "GET", "/admin/usage", admin_gw.admin, key_id=key_id)
    for res in (listing, usage):
        assert marker not in res.text and "refund it" not in res.text
    assert set(rows[0]) == set(
        openapi_document()["components"]["schemas"]["LedgerRow"]["properties"]
    )

    def ids(**params: Any) -> list[str]:
        res = call(admin_gw, "GET", "/admin/requests", admin_gw.admin, key_id=key_id, **params)
        return [r["request_id"] for r in res.json()["data"]]

    assert ids(error_code="tool_arguments_invalid") == [rows[0]["request_id"]]
    assert ids(error_code="none") == [rows[1]["request_id"]]
    assert ids(status="200") == [rows[1]["request_id"]]
    assert ids(model="other-model") == []
    assert ids(limit="1") == [rows[0]["request_id"]]
    assert ids(before=str(rows[0]["started_at"])) == [rows[1]["request_id"]]


def test_admin_schema_check_is_the_v1_check(admin_gw: AdminGateway) -> None:
    body = {
        "tools": [
            TOOL,
            {
                "type": "function",
                "function": {"name": "loose", "strict": True, "parameters": NON_STRICT},
            },
        ]
    }
    admin = call(admin_gw, "POST", "/admin/schemas/check", admin_gw.admin, body)
    v1 = call(admin_gw, "POST", "/v1/schemas/check", admin_gw.customer, body)
    assert admin.status_code == v1.status_code == 200
    assert admin.json() == v1.json()
    assert admin.json()["schemas"][1]["strictify"]["ok"] is True


def test_console_is_served_with_a_strict_csp(admin_gw: AdminGateway) -> None:
    page = httpx.get(admin_gw.base_url + "/console", timeout=5)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert "<script>" not in page.text and "sk_admin_" not in page.text.replace("sk_admin_…", "")
    for asset, kind in [("app.js", "text/javascript"), ("console.css", "text/css")]:
        res = httpx.get(f"{admin_gw.base_url}/console/{asset}", timeout=5)
        assert res.status_code == 200 and res.headers["content-type"].startswith(kind)
        assert res.headers["content-security-policy"] == csp
    missing = httpx.get(admin_gw.base_url + "/console/..%2fapp.py", timeout=5)
    assert missing.status_code == 404
