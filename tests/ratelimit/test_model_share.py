"""A model's upstream slots, shared between tenants, through HTTP on a gateway with
PostgreSQL and Redis.

A model with ``max_concurrent = 4`` has four calls in flight at most, and one key's
requests hold at most ``model_share_per_key`` (half) of them: past its share a key gets
429 ``concurrency_limit_exceeded`` while another key still finds a slot; past the model's
slots every key gets 503 ``overloaded``; an ``n`` above a key's share is 400
``n_above_limit``. A model without ``max_concurrent`` has no bound of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from tests.ratelimit.helpers import REDIS_URL
from tests.support.databases import pg_database
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import RecordedRequest, Reply, ScriptedUpstream, Step

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


def _held(request: RecordedRequest) -> Step:
    return Reply(content="ok", held=True)


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    base = scripted_upstream_server.base_url
    with pg_database("syntic_model_share") as url:
        gw = start_gateway(
            tmp_path_factory.mktemp("model-share"),
            [model_table("narrow", base, max_concurrent=4), model_table("open", base)],
            env={"SYNTIC_DATABASE_URL": url, "SYNTIC_REDIS_URL": REDIS_URL},
        )
        try:
            yield gw
        finally:
            gw.stop()


def _status(client: openai.OpenAI, model: str, n: int = 1) -> tuple[int, dict[str, Any]]:
    try:
        client.chat.completions.create(model=model, messages=MESSAGES, n=n)
    except openai.APIStatusError as exc:
        return exc.status_code, exc.response.json()["error"]
    return 200, {}


def _client(gw: GatewayProcess, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_one_key_holds_at_most_half_of_a_models_slots(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = _held
    keys = [gw.create_key(f"tenant-{i}") for i in range(3)]
    with (
        _client(gw, keys[0]) as flood,
        _client(gw, keys[1]) as other,
        _client(gw, keys[2]) as third,
        ThreadPoolExecutor(4) as pool,
    ):
        mine = [pool.submit(_status, flood, "narrow") for _ in range(2)]
        upstream.wait_for_requests(2, timeout=20)  # the flooding key's whole share
        status, error = _status(flood, "narrow")
        assert (status, error["code"]) == (429, "concurrency_limit_exceeded")
        assert "'narrow'" in error["message"]
        theirs = [pool.submit(_status, other, "narrow") for _ in range(2)]
        upstream.wait_for_requests(2 + 2, timeout=20)  # another tenant got its share
        status, error = _status(third, "narrow")  # the model's four slots are all taken
        assert (status, error["code"]) == (503, "overloaded")
        upstream.release()
        assert [f.result(timeout=20) for f in mine + theirs] == [(200, {})] * 4
        upstream.responder = lambda _r: Reply(content="ok")
        assert _status(third, "narrow")[0] == 200  # the slots were given back


def test_an_n_above_a_keys_share_and_a_model_without_a_bound(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    key = gw.create_key("wide")
    with _client(gw, key) as client:
        status, error = _status(client, "narrow", n=3)  # more than half of 4, ever
        assert (status, error["code"], error["param"]) == (400, "n_above_limit", "n")
        assert upstream.requests == []
        upstream.responder = _held
        with ThreadPoolExecutor(1) as pool:
            wide = pool.submit(_status, client, "open", 3)  # no bound of its own
            upstream.wait_for_requests(3, timeout=20)
            upstream.release()
            assert wide.result(timeout=20) == (200, {})
