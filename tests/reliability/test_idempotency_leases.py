"""Idempotency claims are leases (real gateways sharing a private Redis and a database):
a killed replica's claim lapses within a lease and a retry on another replica is served;
a waiter gives up with 409 ``idempotency_in_progress`` + ``retry-after`` after its bounded
wait (never a 504), stops when its client leaves, and never holds up a shutdown."""

from __future__ import annotations

import concurrent.futures
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.reliability.helpers import all_rows, chat_body
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.private_services import PrivateRedis
from tests.support.scripted_upstream import Reply, ScriptedUpstream

LEASE = {"idempotency_lease_s": 1.0}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    db = tmp_path_factory.mktemp("leases") / "shared.db"
    with PrivateRedis() as redis:
        yield {"SYNTIC_REDIS_URL": redis.url, "SYNTIC_DATABASE_URL": f"sqlite:///{db}"}


def _start(
    tmp_path_factory: pytest.TempPathFactory,
    upstream: ScriptedUpstream,
    env: dict[str, str],
    name: str,
    **server: Any,
) -> GatewayProcess:
    return start_gateway(
        tmp_path_factory.mktemp(name),
        [model_table("m", upstream.base_url)],
        env=env,
        server={**LEASE, **server},
    )


@pytest.fixture(scope="module")
def brief(
    tmp_path_factory: pytest.TempPathFactory,
    scripted_upstream_server: ScriptedUpstream,
    shared: dict[str, str],
) -> Iterator[GatewayProcess]:
    """A replica whose waiters give up after one second."""
    gw = _start(tmp_path_factory, scripted_upstream_server, shared, "brief", idempotency_wait_s=1.0)
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def patient(
    tmp_path_factory: pytest.TempPathFactory,
    scripted_upstream_server: ScriptedUpstream,
    shared: dict[str, str],
) -> Iterator[GatewayProcess]:
    """A replica whose waiters would wait a minute (longer than any test here)."""
    gw = _start(
        tmp_path_factory, scripted_upstream_server, shared, "patient", idempotency_wait_s=60.0
    )
    yield gw
    gw.stop()


def _post(gw: GatewayProcess, api_key: str, key: str, timeout: float = 20) -> httpx.Response:
    headers = {"authorization": f"Bearer {api_key}", "idempotency-key": key}
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=chat_body(tools=[]),
        headers=headers,
        timeout=timeout,
    )


def _inflight(gw: GatewayProcess) -> float:
    text = httpx.get(gw.base_url + "/metrics", timeout=5).text
    line = next(m for m in text.splitlines() if m.startswith("syntic_inflight_requests"))
    return float(line.split()[-1])


def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_a_killed_owner_claim_lapses_and_the_retry_is_served(
    tmp_path_factory: pytest.TempPathFactory,
    scripted_upstream_server: ScriptedUpstream,
    upstream: ScriptedUpstream,
    shared: dict[str, str],
    brief: GatewayProcess,
) -> None:
    victim = _start(tmp_path_factory, scripted_upstream_server, shared, "victim")
    key = str(uuid.uuid4())
    upstream.queue(Reply(content="never answered", delay=30), Reply(content="served"))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(_post, victim, brief.api_key, key, 60)
        upstream.wait_for_requests(1)  # the victim owns the claim and is mid-call
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        # The retry (what nginx's proxy_next_upstream or the client does) on another
        # replica: served within the client's bound, by a fresh call, not a 504.
        again = _post(brief, brief.api_key, key, timeout=10)
    assert again.status_code == 200, again.text
    assert "idempotent-replayed" not in again.headers
    assert again.json()["choices"][0]["message"]["content"] == "served"
    assert len(upstream.requests) == 2


def test_a_waiter_gets_409_with_retry_after_then_the_replay(
    upstream: ScriptedUpstream,
    brief: GatewayProcess,
) -> None:
    key = str(uuid.uuid4())
    upstream.queue(Reply(content="slow", delay=4))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        owner = pool.submit(_post, brief, brief.api_key, key)
        upstream.wait_for_requests(1)
        waiter = _post(brief, brief.api_key, key)
        assert not owner.done()
        assert waiter.status_code == 409, waiter.text
        assert waiter.json()["error"]["code"] == "idempotency_in_progress"
        assert waiter.json()["error"]["type"] == "invalid_request_error"  # OpenAI's for a 409
        assert waiter.headers["retry-after"] == "1"  # what is left of a one-second lease
        first = owner.result()
    again = _post(brief, brief.api_key, key)
    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert len(upstream.requests) == 1


def _waiter_rows(gw: GatewayProcess, since: float) -> list[dict[str, Any]]:
    return [r for r in all_rows(gw) if r["started_at"] >= since and r["upstream_calls"] == 0]


def test_a_waiter_stops_when_its_client_leaves(
    upstream: ScriptedUpstream,
    brief: GatewayProcess,
    patient: GatewayProcess,
) -> None:
    key = str(uuid.uuid4())
    upstream.queue(Reply(content="slow", delay=4))
    since = time.time()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        owner = pool.submit(_post, brief, brief.api_key, key)
        upstream.wait_for_requests(1)
        with pytest.raises(httpx.ReadTimeout):
            _post(patient, brief.api_key, key, timeout=0.5)
        # The waiter's request ends (and is billed as a disconnect) while the owner is
        # still running: it stopped waiting when its client left.
        _until(lambda: _waiter_rows(patient, since))
        assert not owner.done()
        (row,) = _waiter_rows(patient, since)
        assert (row["status"], row["error_code"]) == (499, "client_disconnected")
        assert owner.result().status_code == 200


def test_a_waiter_does_not_hold_up_shutdown(
    upstream: ScriptedUpstream,
    brief: GatewayProcess,
    patient: GatewayProcess,
) -> None:
    key = str(uuid.uuid4())
    upstream.queue(Reply(content="slow", delay=4))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        owner = pool.submit(_post, brief, brief.api_key, key)
        upstream.wait_for_requests(1)
        waiter = pool.submit(_post, patient, brief.api_key, key, 30)
        # The scrape counts itself: 2 means the waiter is in flight on the patient replica.
        _until(lambda: _inflight(patient) >= 2)
        patient.proc.send_signal(signal.SIGTERM)
        response = waiter.result()
        assert response.status_code == 409, response.text
        assert response.json()["error"]["code"] == "idempotency_in_progress"
        assert patient.proc.wait(20) in (0, -signal.SIGTERM)
        assert not owner.done()  # the replica stopped while the owner still ran
        assert owner.result().status_code == 200
