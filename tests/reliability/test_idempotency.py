"""``Idempotency-Key`` end to end, with the in-process store and with Redis
(a private ``redis-server``; two gateways sharing it see each other's keys)."""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.helpers import chat_body, ledger_rows
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.openai_helpers import BAD_ARGS, GOOD_ARGS
from tests.support.private_services import PrivateRedis
from tests.support.scripted_upstream import Call, HttpError, Reply, ScriptedUpstream

OK = Reply(tool_calls=[Call("create_refund", GOOD_ARGS)])
BAD = Reply(tool_calls=[Call("create_refund", BAD_ARGS)])


@pytest.fixture(scope="module")
def redis_server() -> Iterator[PrivateRedis]:
    with PrivateRedis() as server:
        yield server


@pytest.fixture(scope="module", params=["memory", "redis"])
def gw(
    request: pytest.FixtureRequest,
    scripted_upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    env = {}
    if request.param == "redis":
        env["SYNTIC_REDIS_URL"] = request.getfixturevalue("redis_server").url
    workdir: Path = tmp_path_factory.mktemp(f"idem-{request.param}")
    gateway = start_gateway(workdir, [model_table("m", scripted_upstream_server.base_url)], env=env)
    try:
        yield gateway
    finally:
        gateway.stop()


def _post(
    gw: GatewayProcess, body: dict[str, Any], key: str | None, api_key: str | None = None
) -> httpx.Response:
    headers = {"authorization": f"Bearer {api_key or gw.api_key}"}
    if key is not None:
        headers["idempotency-key"] = key
    return httpx.post(gw.base_url + "/v1/chat/completions", json=body, headers=headers, timeout=20)


def test_retry_returns_the_stored_response_without_a_second_call(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(OK, OK)
    key = str(uuid.uuid4())
    first = _post(gw, chat_body(), key)
    again = _post(gw, chat_body(), key)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert again.headers["x-syntic-schema-retries"] == first.headers["x-syntic-schema-retries"]
    assert len(upstream.requests) == 1
    rows = ledger_rows(gw, [first.headers["x-request-id"], again.headers["x-request-id"]])
    assert sorted(r["upstream_calls"] for r in rows.values()) == [0, 1]


def test_concurrent_duplicates_make_exactly_one_upstream_call(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(*[Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], delay=0.5)] * 6)
    key = str(uuid.uuid4())
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(lambda _: _post(gw, chat_body(), key), range(6)))
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1
    assert len(upstream.requests) == 1
    assert sum(r.headers.get("idempotent-replayed") == "true" for r in responses) == 5


def test_same_key_with_a_different_body_is_refused(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(OK, OK)
    key = str(uuid.uuid4())
    assert _post(gw, chat_body(), key).status_code == 200
    other = chat_body(messages=[{"role": "user", "content": "refund order 111111"}])
    r = _post(gw, other, key)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "idempotency_key_reused"
    assert len(upstream.requests) == 1


def test_retryable_failures_are_not_stored(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(HttpError(500), OK)
    key = str(uuid.uuid4())
    assert _post(gw, chat_body(), key).status_code == 502
    r = _post(gw, chat_body(), key)
    assert r.status_code == 200 and "idempotent-replayed" not in r.headers
    assert len(upstream.requests) == 2


def test_a_final_422_is_stored_and_replayed(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(BAD, BAD, BAD, BAD)
    key = str(uuid.uuid4())
    first = _post(gw, chat_body(), key)
    again = _post(gw, chat_body(), key)
    assert first.status_code == again.status_code == 422
    assert first.json()["error"]["code"] == "tool_arguments_invalid"
    assert again.content == first.content
    assert len(upstream.requests) == 2  # the first attempt and its one correction


def test_keys_are_scoped_per_api_key(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(OK, OK)
    other_key = gw.create_key(f"other-{uuid.uuid4().hex[:6]}")
    key = str(uuid.uuid4())
    assert _post(gw, chat_body(), key).status_code == 200
    r = _post(gw, chat_body(), key, api_key=other_key)
    assert r.status_code == 200 and "idempotent-replayed" not in r.headers
    assert len(upstream.requests) == 2


def test_streaming_requests_pass_through(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="hi"), Reply(content="hi"))
    key = str(uuid.uuid4())
    for _ in range(2):
        r = _post(gw, chat_body(stream=True, tools=[]), key)
        assert r.status_code == 200 and "[DONE]" in r.text
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("bad", ["", "x" * 300])
def test_malformed_key_is_a_400(gw: GatewayProcess, bad: str) -> None:
    r = _post(gw, chat_body(), bad)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_idempotency_key")


def test_two_gateways_sharing_redis_replay_each_others_responses(
    redis_server: PrivateRedis,
    scripted_upstream_server: ScriptedUpstream,
    upstream: ScriptedUpstream,
    tmp_path: Path,
) -> None:
    models = [model_table("m", scripted_upstream_server.base_url)]
    env = {
        "SYNTIC_REDIS_URL": redis_server.url,
        "SYNTIC_DATABASE_URL": f"sqlite:///{tmp_path / 'shared.db'}",
    }
    one = start_gateway(tmp_path / "one", models, env=env)
    two = start_gateway(tmp_path / "two", models, env=env)
    try:
        upstream.queue(OK, OK)
        key = str(uuid.uuid4())
        first = _post(one, chat_body(), key)
        again = _post(two, chat_body(), key, api_key=one.api_key)
        assert first.status_code == again.status_code == 200
        assert again.content == first.content
        assert again.headers["idempotent-replayed"] == "true"
        assert len(upstream.requests) == 1
    finally:
        one.stop()
        two.stop()


def test_messages_endpoint_replays_too(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="hello"), Reply(content="hello"))
    key = str(uuid.uuid4())
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-api-key": gw.api_key, "anthropic-version": "2023-06-01", "idempotency-key": key}
    first, again = (
        httpx.post(gw.base_url + "/v1/messages", json=body, headers=headers, timeout=20)
        for _ in range(2)
    )
    assert first.status_code == again.status_code == 200
    assert again.content == first.content and first.json()["type"] == "message"
    assert again.headers["idempotent-replayed"] == "true"
    assert len(upstream.requests) == 1
