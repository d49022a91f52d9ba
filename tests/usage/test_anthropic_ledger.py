"""Every outcome of a ``/v1/messages`` request, streamed or not, leaves one ledger row with
first-attempt and correction tokens apart and ``schema_retries`` (where billing finds the
retries of a stream, whose headers left before they were known). A dedicated gateway
subprocess with its own SQLite file; rows read after SIGTERM."""

from __future__ import annotations

import json
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.anthropic_wire import AnthropicRenderer, anthropic_e2e_models
from tests.support.gateway_proc import GatewayProcess, start_gateway
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

SCHEMA = {
    "type": "object",
    "properties": {"amount_pence": {"type": "integer"}},
    "required": ["amount_pence"],
    "additionalProperties": False,
}
TOOL = {"name": "create_refund", "strict": True, "input_schema": SCHEMA}
GOOD, BAD = '{"amount_pence": 1250}', '{"amount_pence": "12.50"}'
MESSAGES = [{"role": "user", "content": "refund"}]


@pytest.fixture(scope="module")
def ledger_gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    gw = start_gateway(
        tmp_path_factory.mktemp("anthropic-ledger"),
        anthropic_e2e_models(scripted_upstream_server.base_url),
    )
    yield gw
    gw.stop()


def _post(gw: GatewayProcess, **body: Any) -> httpx.Response:
    payload = {"max_tokens": 64, "messages": MESSAGES, "tools": [TOOL], **body}
    return httpx.post(
        gw.base_url + "/v1/messages", json=payload, timeout=20, headers={"x-api-key": gw.api_key}
    )


def _rows(gw: GatewayProcess) -> dict[str, dict[str, Any]]:
    db = Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return {r["request_id"]: dict(r) for r in con.execute("SELECT * FROM usage_records")}
    finally:
        con.close()


TOKENS = (
    "prompt_tokens",
    "completion_tokens",
    "correction_prompt_tokens",
    "correction_completion_tokens",
    "schema_retries",
    "upstream_calls",
)


def test_every_messages_outcome_is_recorded(
    ledger_gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    gw = ledger_gw
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", GOOD)], usage=(11, 3)),  # ok
        Reply(tool_calls=[Call("create_refund", BAD)], usage=(20, 4)),  # corrected, streamed
        Reply(tool_calls=[Call("create_refund", GOOD)], usage=(30, 5)),
        Reply(tool_calls=[Call("create_refund", BAD)], usage=(40, 6)),  # 422 streamed
        Reply(tool_calls=[Call("create_refund", BAD)], usage=(50, 7)),
    )
    responses = {
        "ok": _post(gw, model="an-strict"),
        "stream-corrected": _post(gw, model="an-strict", stream=True),
        "stream-422": _post(gw, model="oa-strict", stream=True),
        "400": _post(gw, model="an-strict", tools=[{**TOOL, "input_schema": {"type": "object"}}]),
    }
    assert {k: r.status_code for k, r in responses.items()} == {
        "ok": 200,
        "stream-corrected": 200,
        "stream-422": 422,  # refused before any output: a plain HTTP error
        "400": 400,
    }
    assert responses["stream-422"].json()["error"]["code"] == "tool_arguments_invalid"
    last_delta = [
        json.loads(line[6:])
        for line in responses["stream-corrected"].text.splitlines()
        if line.startswith("data: ") and '"message_delta"' in line
    ]
    assert last_delta[-1]["usage"]["schema_retries"] == 1
    ids = {k: r.headers["x-request-id"] for k, r in responses.items()}
    assert gw.stop() in (0, -signal.SIGTERM)  # graceful shutdown flushes the ledger
    rows = _rows(gw)
    assert set(ids.values()) <= set(rows)
    row = {k: rows[v] for k, v in ids.items()}
    assert {k: r["endpoint"] for k, r in row.items()} == dict.fromkeys(ids, "/v1/messages")
    assert tuple(row["ok"][t] for t in TOKENS) == (11, 3, 0, 0, 0, 1)
    assert not row["ok"]["streamed"] and row["ok"]["model"] == "an-strict"
    assert tuple(row["stream-corrected"][t] for t in TOKENS) == (20, 4, 30, 5, 1, 2)
    assert row["stream-corrected"]["streamed"] and row["stream-corrected"]["status"] == 200
    assert tuple(row["stream-422"][t] for t in TOKENS) == (40, 6, 50, 7, 1, 2)
    assert (row["stream-422"]["status"], row["stream-422"]["error_code"]) == (
        422,
        "tool_arguments_invalid",
    )
    assert (row["400"]["error_code"], row["400"]["upstream_calls"]) == ("schema_not_strict", 0)
