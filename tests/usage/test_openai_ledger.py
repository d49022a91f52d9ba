"""Every outcome of a chat-completions request leaves one ledger row (first attempt and
correction tokens apart), and the rate limiter is asked before the upstream call.
A dedicated gateway subprocess with its own SQLite file; rows read after SIGTERM."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fixtures import e2e_models
from tests.support.gateway_proc import GatewayProcess, start_gateway
from tests.support.openai_helpers import BAD_ARGS, GOOD_ARGS, MESSAGES, refund_tool
from tests.support.scripted_upstream import Call, HttpError, Reply, ScriptedUpstream


@pytest.fixture(scope="module")
def ledger_gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_gateway(
        tmp_path_factory.mktemp("ledger"), e2e_models(scripted_upstream_server.base_url)
    )
    yield gw
    gw.stop()


def _post(gw: GatewayProcess, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=body,
        timeout=20,
        headers={"authorization": f"Bearer {key or gw.api_key}"},
    )


def _rows(gw: GatewayProcess) -> dict[str, sqlite3.Row]:
    db = Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return {r["request_id"]: r for r in con.execute("SELECT * FROM usage_records")}
    finally:
        con.close()


def test_rate_limit_refuses_before_upstream(
    ledger_gateway: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    key = ledger_gateway.create_key("limited", "--rpm", "2", "--tpm", "100000")
    upstream.queue(Reply(content="a"), Reply(content="b"))
    body = {"model": "strict-model", "messages": MESSAGES}
    admitted = [_post(ledger_gateway, body, key) for _ in range(2)]
    assert [r.status_code for r in admitted] == [200, 200]
    # Admitted responses carry the limits and what is left of them.
    assert [r.headers["x-ratelimit-limit-requests"] for r in admitted] == ["2", "2"]
    assert [r.headers["x-ratelimit-remaining-requests"] for r in admitted] == ["1", "0"]
    assert [r.headers["x-ratelimit-limit-tokens"] for r in admitted] == ["100000"] * 2
    first_left = int(admitted[0].headers["x-ratelimit-remaining-tokens"])
    assert 0 < first_left < 100000
    assert int(admitted[1].headers["x-ratelimit-remaining-tokens"]) < first_left
    assert all(0 < float(r.headers["x-ratelimit-reset"].removesuffix("s")) <= 60 for r in admitted)
    refused = _post(ledger_gateway, body, key)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["x-ratelimit-limit-requests"] == "2"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert len(upstream.requests) == 2


def test_every_outcome_is_recorded(
    ledger_gateway: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    gw = ledger_gateway
    strict = {"model": "strict-model", "messages": MESSAGES, "tools": [refund_tool()]}
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], usage=(11, 3)),  # 200
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)], usage=(20, 4)),  # 200 after
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], usage=(30, 5)),  # correction
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)], usage=(40, 6)),  # 422
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)], usage=(50, 7)),
        HttpError(500),  # 502
    )
    responses = {
        "ok": _post(gw, strict),
        "corrected": _post(gw, strict),
        "422": _post(gw, strict),
        "502": _post(gw, strict),
        "400": _post(gw, {**strict, "tools": [refund_tool(schema={"type": "object"})]}),
        "404": _post(gw, {**strict, "model": "nope"}),
        "401": _post(gw, strict, key="sk_live_wrong"),
    }
    assert {k: r.status_code for k, r in responses.items()} == {
        "ok": 200,
        "corrected": 200,
        "422": 422,
        "502": 502,
        "400": 400,
        "404": 404,
        "401": 401,
    }
    ids = {k: r.headers["x-request-id"] for k, r in responses.items()}
    # SIGTERM: graceful shutdown flushes the ledger (uvicorn re-raises the signal at exit)
    assert gw.stop() in (0, -signal.SIGTERM)
    rows = _rows(gw)
    assert set(ids.values()) <= set(rows)

    def row(name: str) -> dict[str, Any]:
        return dict(rows[ids[name]])

    assert {k: row(k)["status"] for k in ids} == {
        "ok": 200,
        "corrected": 200,
        "422": 422,
        "502": 502,
        "400": 400,
        "404": 404,
        "401": 401,
    }
    tokens = (
        "prompt_tokens",
        "completion_tokens",
        "correction_prompt_tokens",
        "correction_completion_tokens",
        "schema_retries",
        "upstream_calls",
    )
    assert tuple(row("ok")[t] for t in tokens) == (11, 3, 0, 0, 0, 1)
    assert tuple(row("corrected")[t] for t in tokens) == (20, 4, 30, 5, 1, 2)
    assert tuple(row("422")[t] for t in tokens) == (40, 6, 50, 7, 1, 2)
    assert row("422")["error_code"] == "tool_arguments_invalid"
    assert (row("502")["error_code"], row("502")["upstream_calls"]) == ("upstream_error", 1)
    assert row("400")["upstream_calls"] == 0
    assert row("400")["error_code"] == "schema_not_strict"
    assert row("404")["error_code"] == "model_not_found"
    assert (row("401")["error_code"], row("401")["key_id"]) == ("invalid_api_key", None)
    assert row("ok")["key_id"] is not None and row("ok")["model"] == "strict-model"
    assert row("ok")["endpoint"] == "/v1/chat/completions" and not row("ok")["streamed"]
