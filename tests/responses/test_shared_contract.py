"""What ``/v1/responses`` shares with the other dialects, unchanged: the ledger row, the
``Idempotency-Key`` replay, the per-key rate limit, and the OpenAPI document's shapes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import httpx
import openai
import pytest

from tests.dialects.test_openai_stream_e2e import ledger_row
from tests.ops.helpers import conforms
from tests.responses.test_create import REFUND
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream


def post(
    gw: GatewayProcess, body: Mapping[str, object], key: str | None = None, **headers: str
) -> httpx.Response:
    return httpx.post(
        gw.base_url + "/v1/responses",
        json=body,
        timeout=20,
        headers={"authorization": f"Bearer {key or gw.api_key}", **headers},
    )


def test_ledger_row_and_openapi_shape(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", '{"order_id": "A1", "amount_pence": "x"}')]),
        Reply(
            tool_calls=[Call("create_refund", '{"order_id": "A1", "amount_pence": 1}')],
            usage=(11, 3),
        ),
    )
    answer = post(gw, {"model": "strict-model", "input": "Refund", "tools": [REFUND]})
    assert answer.status_code == 200
    conforms(answer.json(), "Response")
    row = ledger_row(gw, answer.headers["x-request-id"])
    assert (row["endpoint"], row["model"], row["status"]) == ("/v1/responses", "strict-model", 200)
    assert (row["schema_retries"], row["upstream_calls"]) == (1, 2)
    assert (row["correction_prompt_tokens"], row["correction_completion_tokens"]) == (11, 3)
    stored = httpx.get(
        f"{gw.base_url}/v1/responses/{answer.json()['id']}",
        headers={"authorization": f"Bearer {gw.api_key}"},
    )
    conforms(stored.json(), "Response")


def test_refused_request_has_a_ledger_row(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    bad = Call("create_refund", '{"order_id": 1, "amount_pence": 1}')
    upstream.queue(Reply(tool_calls=[bad]), Reply(tool_calls=[bad]))
    answer = post(gw, {"model": "strict-model", "input": "Refund", "tools": [REFUND]})
    assert answer.status_code == 422
    conforms(answer.json(), "ErrorEnvelope")
    row = ledger_row(gw, answer.headers["x-request-id"])
    assert (row["status"], row["error_code"]) == (422, "tool_arguments_invalid")


def test_idempotency_key_replays_without_a_second_call(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="once"))
    key = str(uuid.uuid4())
    body = {"model": "strict-model", "input": "once please"}
    first = post(gw, body, **{"idempotency-key": key})
    again = post(gw, body, **{"idempotency-key": key})
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()  # the same response id: stored once
    assert len(upstream.requests) == 1
    other = post(gw, {**body, "input": "different"}, **{"idempotency-key": key})
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"


def test_rate_limit_applies(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    key = gw.create_key("responses-rpm", "--rpm", "1")
    upstream.queue(Reply(content="one"))
    assert post(gw, {"model": "strict-model", "input": "a"}, key=key).status_code == 200
    limited = post(gw, {"model": "strict-model", "input": "b"}, key=key)
    assert limited.status_code == 429 and "retry-after" in limited.headers
    assert len(upstream.requests) == 1


def test_unknown_model_and_bad_json(client: openai.OpenAI, gw: GatewayProcess) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="no-such-model", input="x")
    assert info.value.code == "model_not_found" and info.value.param == "model"
    broken = httpx.post(
        gw.base_url + "/v1/responses",
        content=b"{nope",
        headers={"authorization": f"Bearer {gw.api_key}"},
    )
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
    anonymous = httpx.post(gw.base_url + "/v1/responses", json={"model": "m", "input": "x"})
    assert anonymous.status_code == 401
    assert httpx.get(gw.base_url + "/v1/responses/resp_x").status_code == 401
