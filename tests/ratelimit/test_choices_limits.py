"""``n`` choices against a key's rpm and the in-flight bounds, through HTTP.

A chat request with ``n`` choices makes ``n`` upstream calls at once, so it counts ``n``
requests against the key's rpm (per-process limits and Redis alike) and holds ``n`` of
``max_inflight``'s slots and ``n`` of its key's (``max_concurrent``, by default half of
``max_inflight``); an ``n`` that could never be admitted is 400 with param ``n``. What the
gateway sent is counted by the scripted upstream (requests, most at once).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.ratelimit.helpers import REDIS_URL
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import RecordedRequest, Reply, ScriptedUpstream, Step

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


def _ok(request: RecordedRequest) -> Step:
    return Reply(content="ok")


def _held(request: RecordedRequest) -> Step:
    return Reply(content="ok", held=True)


@pytest.fixture(scope="module", params=["local", "redis"])
def gw(
    request: pytest.FixtureRequest,
    scripted_upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    env = {"SYNTIC_REDIS_URL": REDIS_URL} if request.param == "redis" else {}
    gw = start_gateway(
        tmp_path_factory.mktemp("choices-limits"),
        [model_table("m", scripted_upstream_server.base_url)],
        server={"max_inflight": 4, "max_concurrent_per_key": 4},
        env=env,
    )
    try:
        yield gw
    finally:
        gw.stop()


def _client(gw: GatewayProcess, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def _status(client: openai.OpenAI, n: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, error object (empty on success) and headers of one ``n``-choice request."""
    try:
        raw = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES, n=n)
    except openai.APIStatusError as exc:
        return exc.status_code, exc.response.json()["error"], dict(exc.response.headers)
    assert len(raw.parse().choices) == n
    return raw.status_code, {}, dict(raw.headers)


def test_n_counts_n_requests_against_the_keys_rpm(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = _ok
    with _client(gw, gw.create_key("rpm-5", "--rpm", "5")) as client:
        status, error, _ = _status(client, 16)  # 16 requests could never fit in 5
        assert (status, error["code"], error["param"]) == (400, "n_above_limit", "n")
        assert upstream.requests == []
        status, _, headers = _status(client, 3)  # the 400 counted one: 1 + 3 of 5
        assert (status, headers["x-ratelimit-remaining-requests"]) == (200, "1")
        status, error, headers = _status(client, 2)  # 4 + 2 > 5
        assert (status, error["code"]) == (429, "rate_limit_exceeded")
        assert int(headers["retry-after"]) >= 1
        assert _status(client, 1)[0] == 200  # the last one left
        assert _status(client, 1)[0] == 429
    assert len(upstream.requests) == 3 + 1


def test_n_holds_n_of_the_in_flight_slots(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.responder = _held
    with _client(gw, gw.api_key) as client, ThreadPoolExecutor(2) as pool:
        status, error, _ = _status(client, 5)  # more than max_inflight = 4, ever
        assert (status, error["code"], error["param"]) == (400, "n_above_limit", "n")
        wide = pool.submit(_status, client, 4)
        upstream.wait_for_requests(4, timeout=20)  # all four slots taken, calls held
        more: Future[tuple[int, dict[str, Any], dict[str, str]]] = pool.submit(_status, client, 2)
        _done_or_upstream_called(more, upstream, 5)
        upstream.release()
        assert wide.result(timeout=20)[0] == 200
        status, error, headers = more.result(timeout=20)
    assert (status, error.get("code"), headers.get("retry-after")) == (503, "overloaded", "1")
    assert upstream.max_in_flight == 4
    assert len(upstream.requests) == 4


def _done_or_upstream_called(
    future: Future[Any], upstream: ScriptedUpstream, calls: int, timeout: float = 20.0
) -> None:
    """Wait until ``future`` is done or the upstream has seen ``calls`` requests (the
    gateway let the request through: the test then fails on its status, not a hang)."""
    deadline = time.monotonic() + timeout
    while not future.done() and len(upstream.requests) < calls:
        assert time.monotonic() < deadline, "neither answered nor sent upstream"
        time.sleep(0.01)


def test_a_request_past_its_slots_costs_the_key_nothing(
    gw: GatewayProcess, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """503 for want of slots comes before the rate limiter: the key's rpm is untouched."""
    upstream.responder = _held
    key = gw.create_key("rpm-4", "--rpm", "4")
    with _client(gw, gw.api_key) as busy, _client(gw, key) as client, ThreadPoolExecutor(1) as pool:
        wide = pool.submit(_status, busy, 3)
        upstream.wait_for_requests(3, timeout=20)
        status, error, _ = _status(client, 2)  # 3 + 2 > 4 slots
        assert (status, error["code"]) == (503, "overloaded")
        upstream.release()
        assert wide.result(timeout=20)[0] == 200
        status, _, headers = _status(client, 4)  # all 4 of its rpm still there
    assert (status, headers["x-ratelimit-remaining-requests"]) == (200, "0")


@pytest.fixture(scope="module")
def shared(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """Eight slots, so a key's default share is four."""
    gw = start_gateway(
        tmp_path_factory.mktemp("key-concurrency"),
        [model_table("m", scripted_upstream_server.base_url)],
        server={"max_inflight": 8},
    )
    try:
        yield gw
    finally:
        gw.stop()


def test_one_key_holds_at_most_its_share_of_the_slots(
    shared: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = _held
    greedy, other = shared.create_key("greedy"), shared.create_key("other")
    with (
        _client(shared, greedy) as mine,
        _client(shared, other) as theirs,
        ThreadPoolExecutor(3) as pool,
    ):
        first = pool.submit(_status, mine, 4)  # its whole share: half of 8
        upstream.wait_for_requests(4, timeout=20)
        again: Future[tuple[int, dict[str, Any], dict[str, str]]] = pool.submit(_status, mine, 1)
        _done_or_upstream_called(again, upstream, 5)
        # another key still gets the other half
        second = pool.submit(_status, theirs, 4)
        upstream.wait_for_requests(4 + 4, timeout=20)
        status, error, _ = _status(theirs, 1)  # all eight slots taken: the process is full
        assert (status, error["code"]) == (503, "overloaded")
        upstream.release()
        assert first.result(timeout=20)[0] == second.result(timeout=20)[0] == 200
        status, error, headers = again.result(timeout=20)
    assert (status, error.get("code"), headers.get("retry-after")) == (
        429,
        "concurrency_limit_exceeded",
        "1",
    )
    assert upstream.max_in_flight == 8
    assert len(upstream.requests) == 8


def test_a_keys_own_bound_and_an_n_above_it(
    shared: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = _held
    narrow = shared.create_key("narrow", "--max-concurrent", "2")
    with _client(shared, narrow) as client, ThreadPoolExecutor(1) as pool:
        status, error, _ = _status(client, 3)  # more than the key may ever run at once
        assert (status, error["code"], error["param"]) == (400, "n_above_limit", "n")
        both = pool.submit(_status, client, 2)
        upstream.wait_for_requests(2, timeout=20)
        status, error, _ = _status(client, 1)
        assert (status, error["code"]) == (429, "concurrency_limit_exceeded")
        upstream.release()
        assert both.result(timeout=20)[0] == 200
        assert _status(client, 2)[0] == 200  # given back when the request ended
    assert len(upstream.requests) == 4
