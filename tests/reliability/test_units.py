"""Unit tests for the edge's building blocks: edge settings, the retry policy, the in-flight
gate, the body deadline and the in-process idempotency store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gateway.context import RequestContext
from gateway.errors import (
    Overloaded,
    RateLimited,
    RequestTimeout,
    UpstreamError,
    UpstreamTimeout,
)
from gateway.keys.base import Principal
from gateway.middleware.idempotency_store import MemoryStore, Pending, StoredResponse
from gateway.ratelimit.inflight import InflightGate, default_key_limit
from gateway.server.deadlines import Deadlines, body_deadline
from gateway.settings import ConfigError, load_settings
from gateway.upstream.redact import scrub
from gateway.upstream.retry import (
    RetryPolicy,
    UpstreamConnectError,
    UpstreamStatusError,
    parse_retry_after,
)


def test_edge_settings_from_file_and_env(tmp_path: Path) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(
        "[server]\nmax_inflight = 7\nbody_timeout_s = 2.5\n"
        'request_timeout_s = 9\n[[models]]\nname = "m"\nprovider = "openai"\n'
    )
    s = load_settings(config, env={"SYNTIC_MAX_INFLIGHT": "11", "SYNTIC_UPSTREAM_RETRIES": "0"})
    assert (s.max_inflight, s.body_timeout_s, s.request_timeout_s, s.upstream_retries) == (
        11,
        2.5,
        9.0,
        0,
    )
    with pytest.raises(ConfigError, match="max_header_bytes"):
        load_settings(config, env={"SYNTIC_MAX_HEADER_BYTES": "lots"})
    with pytest.raises(ConfigError, match="negative"):
        load_settings(config, env={"SYNTIC_MAX_INFLIGHT": "-1"})
    with pytest.raises(ConfigError, match="at least 1"):
        load_settings(config, env={"SYNTIC_SCHEMA_CACHE_MAX_BYTES": "0"})
    assert (
        load_settings(config, env={"SYNTIC_SCHEMA_CACHE_MAX_BYTES": "65536"}).schema_cache_max_bytes
        == 65536
    )


def test_fleet_settings_are_bounded_and_read_from_file_and_env(tmp_path: Path) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(
        '[server]\nidempotency_lease_s = 2\ndata_dir = "/srv/d"\n'
        '[[models]]\nname = "m"\nprovider = "openai"\n'
    )
    s = load_settings(config, env={"SYNTIC_IDEMPOTENCY_WAIT_S": "3"})
    assert (s.idempotency_lease_s, s.idempotency_wait_s, s.data_dir) == (2.0, 3.0, "/srv/d")
    assert load_settings(config, env={"SYNTIC_DATA_DIR": "/e"}).data_dir == "/e"
    defaults = load_settings(None, env={})
    assert (defaults.ledger_flush_interval_s, defaults.idempotency_lease_s) == (0.2, 5.0)
    for name, value in [
        ("IDEMPOTENCY_LEASE_S", "0.1"),
        ("IDEMPOTENCY_LEASE_S", "600"),
        ("IDEMPOTENCY_WAIT_S", "3600"),
        ("LEDGER_FLUSH_INTERVAL_S", "0"),
        ("LEDGER_SPOOL_SEGMENT_BYTES", "100"),
    ]:
        with pytest.raises(ConfigError, match="between"):
            load_settings(config, env={f"SYNTIC_{name}": value})


def test_body_and_model_share_settings_are_bounded(tmp_path: Path) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(
        "[server]\nmax_input_items = 500\nbody_offload_bytes = 65536\n"
        '[[models]]\nname = "m"\nprovider = "openai"\nmax_concurrent = 8\n'
    )
    s = load_settings(
        config, env={"SYNTIC_BODY_OFFLOAD_WORKERS": "3", "SYNTIC_MODEL_SHARE_PER_KEY": "0.25"}
    )
    assert (
        s.max_input_items,
        s.body_offload_bytes,
        s.body_offload_workers,
        s.model_share_per_key,
        s.models[0].max_concurrent,
    ) == (500, 65536, 3, 0.25, 8)
    defaults = load_settings(tmp_path / "gw.toml", env={})
    assert (defaults.body_offload_workers, defaults.model_share_per_key) == (2, 0.5)
    for name, value in [
        ("MAX_INPUT_ITEMS", "0"),
        ("BODY_OFFLOAD_BYTES", "10"),
        ("BODY_OFFLOAD_WORKERS", "0"),
        ("MODEL_SHARE_PER_KEY", "1.5"),
    ]:
        with pytest.raises(ConfigError, match="between"):
            load_settings(config, env={f"SYNTIC_{name}": value})
    for bad in ("-1", "true", '"8"'):
        config.write_text(f'[[models]]\nname = "m"\nprovider = "openai"\nmax_concurrent = {bad}\n')
        with pytest.raises(ConfigError, match=r"models\[0\]\.max_concurrent"):
            load_settings(config, env={})


@pytest.mark.parametrize(
    "exc, attempt, retried",
    [
        (UpstreamConnectError("refused"), 0, True),
        (UpstreamStatusError("x", upstream_status=429), 0, True),
        (UpstreamStatusError("x", upstream_status=502), 1, True),
        (UpstreamStatusError("x", upstream_status=503), 2, False),  # retries exhausted
        (UpstreamStatusError("x", upstream_status=500), 0, False),
        (UpstreamStatusError("x", upstream_status=400), 0, False),
        (UpstreamTimeout("read timeout"), 0, False),  # the request may have run
        (UpstreamError("reset mid-response"), 0, False),
    ],
)
def test_retry_only_safe_failures(exc: UpstreamError, attempt: int, retried: bool) -> None:
    assert (RetryPolicy(retries=2).delay(attempt, exc) is not None) is retried


def test_retry_after_is_honoured_within_the_deadline() -> None:
    policy = RetryPolicy(retries=2)
    hinted = UpstreamStatusError("x", upstream_status=429, retry_after_s=0.7)
    ctx = RequestContext.start("req_test", "/v1/chat/completions")
    assert policy.delay(0, hinted, ctx.remaining_s()) == 0.7  # no deadline set
    ctx.deadline = time.monotonic() + 0.5  # less time left than asked for
    assert policy.delay(0, hinted, ctx.remaining_s()) is None


@pytest.mark.parametrize(
    "value, seconds",
    [
        ("2", 2.0),
        (" 0.5 ", 0.5),
        ("-1", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value) == seconds


def _ctx() -> RequestContext:
    return RequestContext.start("req_t", "/v1/chat/completions")


def test_inflight_gate_refuses_past_its_limit_and_frees_on_exit() -> None:
    gate = InflightGate(2)
    with gate.admit(_ctx()), gate.admit(_ctx()):
        with pytest.raises(Overloaded) as info, gate.admit(_ctx()):
            pass
        assert info.value.headers["retry-after"] == "1"
    with gate.admit(_ctx()):
        assert gate.inflight == 1
    assert (gate.inflight, gate.refused) == (0, 1)


def test_a_request_holds_one_slot_per_upstream_call_it_runs() -> None:
    gate = InflightGate(5)
    wide, narrow = _ctx(), _ctx()
    with gate.admit(wide):
        gate.hold(wide, 4)  # n = 4
        assert (gate.inflight, wide.slots) == (4, 4)
        with gate.admit(narrow):
            with pytest.raises(Overloaded):
                gate.hold(narrow, 2)  # 4 + 2 > 5
            assert (gate.inflight, narrow.slots) == (5, 1)
    assert (gate.inflight, gate.refused) == (0, 1)


def test_a_key_holds_at_most_its_own_share_and_gets_it_back() -> None:
    gate = InflightGate(8, key_limit=default_key_limit(8, 0))  # half: 4
    greedy, own = Principal("key_g", "g"), Principal("key_o", "o", max_concurrent=1)
    first, second, third, fourth = _ctx(), _ctx(), _ctx(), _ctx()
    first.principal = second.principal = greedy
    third.principal = fourth.principal = own
    with gate.admit(first), gate.admit(second), gate.admit(third), gate.admit(fourth):
        gate.hold(first, 3, greedy)
        with pytest.raises(RateLimited) as info:
            gate.hold(second, 2, greedy)  # 3 + 2 > 4
        assert (info.value.code, info.value.headers["retry-after"]) == (
            "concurrency_limit_exceeded",
            "1",
        )
        gate.hold(second, 1, greedy)
        gate.hold(third, 1, own)
        with pytest.raises(RateLimited):
            gate.hold(fourth, 1, own)  # its own bound, 1
        assert (gate.held_by("key_g"), gate.held_by("key_o"), gate.inflight) == (4, 1, 6)
    assert (gate.held_by("key_g"), gate.held_by("key_o"), gate.inflight) == (0, 0, 0)
    assert gate.key_refused == 2
    assert default_key_limit(0, 0) == 0 and default_key_limit(1, 0) == 1


@pytest.mark.parametrize("shared", [False, True], ids=["own-timer", "shared-timer"])
async def test_body_deadline_times_out_a_trickle(shared: bool) -> None:
    """One deadline for the whole body, not per chunk: a trickle that never pauses as long
    as the deadline is still cut off, before it runs out."""
    chunks = 0

    async def trickle() -> dict[str, object]:
        nonlocal chunks
        chunks += 1
        await asyncio.sleep(0.05)
        return {"type": "http.request", "body": b"x", "more_body": True}

    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop) if shared else None
    due = loop.time() + 0.35
    receive = body_deadline(trickle, 0.35, deadlines=deadlines)
    with pytest.raises(RequestTimeout):
        for _ in range(400):  # 20 s of trickle: far past the deadline, a hang guard
            await receive()
    assert loop.time() >= due - 0.001  # not before the deadline
    assert chunks < 400  # cut off mid-trickle
    assert deadlines is None or len(deadlines) == 0


async def test_deadlines_fire_in_time_order_whatever_the_order_armed() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    cancelled_at: dict[str, float] = {}

    async def sleeper(name: str) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled_at[name] = loop.time() - start
            raise

    start = loop.time()
    tasks = {name: asyncio.create_task(sleeper(name)) for name in ("late", "early", "mid")}
    armed = {
        name: deadlines.arm(tasks[name], start + at)
        for name, at in (("late", 0.30), ("early", 0.10), ("mid", 0.20))
    }
    kept = asyncio.create_task(asyncio.sleep(0.5))
    deadlines.arm(kept, start + 0.15).disarm()  # disarmed: never fires
    # the sleepers' own 10 s is the hang guard: a deadline that never fires leaves no entry
    await asyncio.gather(*tasks.values(), kept, return_exceptions=True)
    assert list(cancelled_at) == ["early", "mid", "late"]
    for name, at in (("early", 0.10), ("mid", 0.20), ("late", 0.30)):
        assert cancelled_at.get(name, 0) >= at - 0.001, (name, cancelled_at)  # never early
        assert armed[name].expired_here()
    assert not kept.cancelled()
    assert len(deadlines) == 0


async def test_disarmed_deadlines_do_not_pile_up() -> None:
    """Arming is a heap push and disarming a flag; the heap is rebuilt once disarmed
    entries outnumber live ones, so a busy gateway's heap stays near its live count."""
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    task = asyncio.create_task(asyncio.sleep(1))
    keep = [deadlines.arm(task, loop.time() + 60) for _ in range(10)]
    for _ in range(10_000):
        deadlines.arm(task, loop.time() + 60).disarm()
    assert len(deadlines) == 10
    assert len(deadlines._heap) <= 2 * 10 + 65
    for deadline in keep:
        deadline.disarm()
    await task
    assert not task.cancelled()


async def test_memory_store_claims_replays_and_stays_bounded() -> None:
    store = MemoryStore(max_entries=2)
    assert await store.claim("a", "fp", "o1", 10) is None
    pending = await store.claim("a", "fp", "o2", 10)
    assert isinstance(pending, Pending) and pending.fingerprint == "fp"
    assert 0 < pending.lease_left_s <= 10
    await store.release("a", "o2")  # not the owner: no effect
    assert await store.renew("a", "o1", 10) and not await store.renew("a", "o2", 10)
    done = StoredResponse("fp", 200, (("content-type", "application/json"),), b"{}")
    await store.complete("a", "o1", done, 10)
    assert await store.claim("a", "other", "o3", 10) == done
    for key in ("b", "c"):
        assert await store.claim(key, "fp", "o4", 10) is None
    assert await store.claim("a", "fp", "o5", 10) is None  # evicted: claimable again
    await store.release("a", "o5")
    assert await store.claim("a", "fp", "o6", 10) is None


def test_scrub_masks_credentials() -> None:
    text = "Incorrect API key provided: sk-proj-abcdefghijklmnop1234 (Bearer abc.def)"
    out = scrub(text + " secret-xyz", "secret-xyz")
    assert "abcdefghijklmnop" not in out and "abc.def" not in out and "secret-xyz" not in out
    assert out.startswith("Incorrect API key provided: [REDACTED]")
