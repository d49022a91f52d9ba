"""Health, readiness, metrics and the request log against a real ``syntic serve`` process."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from tests.ops.helpers import Samples, conforms
from tests.ops.helpers import scrape as scrape_url
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

ROUTE = "/v1/chat/completions"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"amount_pence": {"type": "integer", "minimum": 1}},
    "required": ["amount_pence"],
    "additionalProperties": False,
}
TOOL = {
    "type": "function",
    "function": {"name": "refund", "strict": True, "parameters": SCHEMA},
}
MESSAGES = [{"role": "user", "content": "refund it"}]


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    proc = start_gateway(
        tmp_path_factory.mktemp("ops"),
        [model_table("ops-model", scripted_upstream_server.base_url)],
        env={"SYNTIC_LOG_FORMAT": "json"},
        key_name="ops",
    )
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def client(gw: GatewayProcess) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20)
    yield c
    c.close()


def scrape(gw: GatewayProcess) -> Samples:
    return scrape_url(gw.base_url)


def _requests(m: dict[Any, float], status: str, code: str = "") -> float:
    labels = (("code", code), ("route", ROUTE), ("status", status))
    return m.get(("syntic_requests_total", labels), 0)


def test_healthz_needs_no_key(gw: GatewayProcess) -> None:
    res = httpx.get(gw.base_url + "/healthz", timeout=5)
    assert res.status_code == 200
    assert res.json() == {"status": "ok"}


def test_readyz_reports_each_check(gw: GatewayProcess) -> None:
    res = httpx.get(gw.base_url + "/readyz", timeout=5)
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["status"] == "ready"
    assert body["reasons"] == []
    assert set(body["checks"]) == {"database", "models"}  # no Redis configured here
    assert all(c["ok"] for c in body["checks"].values())


def test_metrics_count_a_request_a_422_and_a_cache_hit(
    gw: GatewayProcess, client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    before = scrape(gw)
    upstream.queue(Reply(tool_calls=[Call("refund", '{"amount_pence": 5}')]))
    client.chat.completions.create(model="ops-model", messages=MESSAGES, tools=[TOOL])  # type: ignore[arg-type, list-item]
    upstream.queue(
        Reply(tool_calls=[Call("refund", '{"amount_pence": "5"}')]),
        Reply(tool_calls=[Call("refund", '{"amount_pence": 0}')]),
    )
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="ops-model", messages=MESSAGES, tools=[TOOL])  # type: ignore[arg-type, list-item]
    after = scrape(gw)

    assert _requests(after, "200") - _requests(before, "200") == 1
    code = "tool_arguments_invalid"
    assert _requests(after, "422", code) - _requests(before, "422", code) == 1
    invalid = ("syntic_tool_arguments_invalid_total", (("code", code),))
    assert after[invalid] - before.get(invalid, 0) == 1
    # the second request reuses the verdict (and compiled schema) of the first
    hits = ("syntic_lint_cache_hits_total", ())
    assert after[hits] - before[hits] == 1
    assert after[("syntic_schema_cache_size", ())] >= 1
    assert after[("syntic_schema_cache_bytes", ())] >= 100  # the refund tool's schema, at least
    kinds = {
        kind: after.get(k, 0) - before.get(k, 0)
        for kind in ("first", "correction")
        if (k := ("syntic_upstream_calls_total", (("kind", kind), ("model", "ops-model"))))
    }
    assert kinds == {"first": 2, "correction": 1}
    corrections = ("syntic_schema_corrections_total", ())
    assert after[corrections] - before[corrections] == 1
    latency = ("syntic_upstream_latency_seconds_count", (("model", "ops-model"),))
    assert after[latency] - before.get(latency, 0) == 3
    allowed = ("syntic_ratelimit_decisions_total", (("decision", "allowed"),))
    assert after[allowed] - before.get(allowed, 0) == 2
    assert after[("syntic_inflight_requests", ())] == 1  # the scrape itself
    assert ("syntic_ledger_queue_depth", ()) in after


def test_unknown_paths_share_one_route_label(gw: GatewayProcess) -> None:
    before = scrape(gw)
    for i in range(3):
        assert httpx.get(f"{gw.base_url}/nope/{i}", timeout=5).status_code == 404
    after = scrape(gw)
    key = ("syntic_requests_total", (("code", "not_found"), ("route", "other"), ("status", "404")))
    assert after[key] - before.get(key, 0) == 3
    assert not any("/nope/" in str(labels) for _, labels in after)


def test_logs_have_one_line_per_request_and_never_a_key(
    gw: GatewayProcess, client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    canary = gw.create_key("canary")
    bogus = "sk_live_" + secrets.token_hex(16)
    upstream.queue(Reply(content="hello"))
    secret_prompt = f"my key is {canary} and my other key is {bogus}"
    res = httpx.post(
        gw.base_url + ROUTE,
        headers={"authorization": f"Bearer {canary}"},
        json={"model": "ops-model", "messages": [{"role": "user", "content": secret_prompt}]},
        timeout=20,
    )
    assert res.status_code == 200, res.text
    request_id = res.headers["x-request-id"]
    denied = httpx.post(
        gw.base_url + ROUTE, headers={"authorization": f"Bearer {bogus}"}, json={}, timeout=5
    )
    assert denied.status_code == 401

    # the access line is written once the response has gone out: wait for it, bounded
    deadline = time.monotonic() + 5
    while denied.headers["x-request-id"] not in gw.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = gw.log()
    for secret in (canary, bogus, canary.split("_")[-1], bogus.split("_")[-1]):
        assert secret not in log
    assert "my key is" not in log  # no prompt either
    lines = [json.loads(x) for x in log.splitlines() if x.startswith("{")]
    mine = [x for x in lines if x.get("request_id") == request_id]
    assert len(mine) == 1
    line = mine[0]
    assert line["logger"] == "syntic.access"
    assert line["route"] == ROUTE and line["status"] == 200 and line["model"] == "ops-model"
    assert str(line["key_id"]).strip() and line["key_id"] not in canary
    assert line["schema_retries"] == 0 and line["streamed"] is False
    assert isinstance(line["latency_ms"], float | int)
    denied_lines = [x for x in lines if x.get("request_id") == denied.headers["x-request-id"]]
    assert [(x["status"], x["code"], x["key_id"]) for x in denied_lines] == [
        (401, "invalid_api_key", None)
    ]


def test_probe_paths_are_not_logged_per_request(gw: GatewayProcess) -> None:
    before = gw.log().count('"route":"/healthz"')
    for _ in range(3):
        httpx.get(gw.base_url + "/healthz", timeout=5)
    assert gw.log().count('"route":"/healthz"') == before


def test_openapi_document_is_served(gw: GatewayProcess) -> None:
    from gateway.routes.openapi import openapi_document

    res = httpx.get(gw.base_url + "/openapi.json", timeout=5)
    assert res.status_code == 200
    assert res.json() == openapi_document()


def test_live_responses_match_the_openapi_document(
    gw: GatewayProcess, client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    auth = {"authorization": f"Bearer {gw.api_key}"}
    base = gw.base_url
    conforms(httpx.get(base + "/v1/models", headers=auth, timeout=5).json(), "ModelList")
    conforms(httpx.get(base + "/readyz", timeout=5).json(), "Readiness")
    conforms(httpx.get(base + "/v1/models", timeout=5).json(), "ErrorEnvelope")
    check = httpx.post(
        base + "/v1/schemas/check",
        headers=auth,
        timeout=5,
        json={"tools": [TOOL, {"name": "a", "input_schema": {"type": "object"}}]},
    )
    conforms(check.json(), "SchemaCheckResult")
    upstream.queue(Reply(tool_calls=[Call("refund", '{"amount_pence": 5}')]))
    res = httpx.post(
        base + ROUTE,
        headers=auth,
        timeout=20,
        json={"model": "ops-model", "messages": MESSAGES, "tools": [TOOL]},
    )
    conforms(res.json(), "ChatCompletion")
    assert res.headers["x-syntic-schema-retries"] == "0"


def test_streamed_request_is_timed_counted_and_logged(
    gw: GatewayProcess, client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    before = scrape(gw)
    upstream.queue(Reply(tool_calls=[Call("refund", '{"amount_pence": 7}')], fragment=3))
    stream = cast(
        "openai.Stream[ChatCompletionChunk]",
        client.chat.completions.create(
            model="ops-model",
            messages=MESSAGES,  # type: ignore[arg-type]
            tools=[TOOL],  # type: ignore[list-item]
            stream=True,
        ),
    )
    chunks = list(stream)
    args = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls and c.choices[0].delta.tool_calls[0].function
    )
    assert args == '{"amount_pence": 7}'
    after = scrape(gw)
    latency = ("syntic_upstream_latency_seconds_count", (("model", "ops-model"),))
    assert after[latency] - before.get(latency, 0) == 1
    assert _requests(after, "200") - _requests(before, "200") == 1
    request_id = stream.response.headers["x-request-id"]
    deadline = time.monotonic() + 5  # access lines are written in batches, ms later
    while request_id not in gw.log() and time.monotonic() < deadline:
        time.sleep(0.01)
    lines = [json.loads(x) for x in gw.log().splitlines() if x.startswith('{"')]
    (line,) = [x for x in lines if x.get("request_id") == request_id]
    assert (line["streamed"], line["status"], line["route"]) == (True, 200, ROUTE)
