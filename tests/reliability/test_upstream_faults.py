"""Upstream faults on cue: what the client sees, how often the upstream was
called (retries only for safe failures, only before the first byte), and exactly one
ledger row per request."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson
import pytest

from tests.ops.helpers import scrape
from tests.reliability.helpers import all_rows, chat_body, ledger_rows
from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.gateway_proc import GatewayProcess, free_port, model_table, start_gateway
from tests.support.openai_helpers import GOOD_ARGS
from tests.support.scripted_upstream import (
    Call,
    Drop,
    HttpError,
    Raw,
    RawStream,
    Reply,
    ScriptedUpstream,
    Step,
)

OK = Reply(tool_calls=[Call("create_refund", GOOD_ARGS)])
TEXT = Reply(content="hello there, how are you", fragment=3)


def _retry_after(status: int, seconds: str) -> Raw:
    body = orjson.dumps({"error": {"message": "slow down", "type": "rate_limit"}})
    return Raw(body, status=status, headers={"retry-after": seconds})


def _sse(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


START = _sse(b'{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]}')


@dataclass(frozen=True)
class Case:
    steps: list[Step]
    status: int
    code: str | None
    calls: int
    model: str = "m"
    stream: bool = False
    min_gap_s: float = 0.0  # least time between the first two upstream calls
    extra: dict[str, object] = field(default_factory=dict)
    attempts: int | None = None  # ledger upstream_calls when not `calls` (connect errors)
    retried: dict[str, int] = field(default_factory=dict)  # retry reason -> attempts


CASES: dict[str, Case] = {
    "connect-refused": Case(
        [], 502, "upstream_unavailable", 0, model="dead", attempts=3, retried={"connect": 2}
    ),
    "429-then-ok-honours-retry-after": Case(
        [_retry_after(429, "0.3"), OK], 200, None, 2, min_gap_s=0.3, retried={"429": 1}
    ),
    "503-then-ok": Case([HttpError(503), OK], 200, None, 2, retried={"503": 1}),
    "502-every-time-bounded": Case(
        [HttpError(502)] * 3, 502, "upstream_error", 3, retried={"502": 2}
    ),
    "retry-after-past-deadline-fails-fast": Case(
        [_retry_after(503, "60")], 502, "upstream_error", 1
    ),
    "500-not-retried": Case([HttpError(500)], 502, "upstream_error", 1),
    "400-not-retried": Case([HttpError(400)], 400, "upstream_rejected", 1),
    "reset-mid-response-not-retried": Case([Drop(delay=0.1)], 502, "upstream_error", 1),
    "timeout-not-retried": Case(
        [Reply(content="x", delay=2)], 504, "upstream_timeout", 1, model="slow"
    ),
    "malformed-json": Case([Raw(b'{"choices": [ {"mess')], 502, "upstream_invalid_response", 1),
    "json-of-wrong-shape": Case([Raw(b"[1, 2, 3]")], 502, "upstream_invalid_response", 1),
    "choices-of-wrong-type": Case(
        [Raw(b'{"choices": [{"message": {"tool_calls": [{"function": 7}]}}]}')],
        502,
        "upstream_invalid_response",
        1,
    ),
    "anthropic-529-then-ok": Case(
        [HttpError(529), OK], 200, None, 2, model="an", retried={"529": 1}
    ),
    "anthropic-429-retry-after": Case(
        [_retry_after(429, "0.3"), OK], 200, None, 2, model="an", min_gap_s=0.3, retried={"429": 1}
    ),
    "anthropic-500-not-retried": Case([HttpError(500)], 502, "upstream_error", 1, model="an"),
    "stream-503-then-ok": Case(
        [HttpError(503), TEXT], 200, None, 2, stream=True, retried={"503": 1}
    ),
    "stream-stall": Case(
        [Reply(content="a b c d e f", fragment=2, stall_after=3)],
        504,
        "upstream_timeout",
        1,
        model="slow",
        stream=True,
    ),
    "stream-reset": Case(
        [Reply(content="a b c d e f", fragment=2, drop_after=3)],
        502,
        "upstream_error",
        1,
        stream=True,
    ),
    "stream-broken-framing": Case(
        [RawStream([START, b'data: {"choices": [{"index": 0, "delta": {"tool_c\n\n'])],
        502,
        "upstream_invalid_response",
        1,
        stream=True,
    ),
    "stream-tool-call-broken-framing": Case(
        [
            RawStream(
                [
                    _sse(
                        b'{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, '
                        b'"id": "c",'
                        b' "function": {"name": "create_refund", "arguments": "{\\"order"}}]}}]}'
                    ),
                    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "func',
                    b'tion": {"arguments": "_number\\": \\"1"}}]}}]}\ndata: [DO\n\n',
                ]
            )
        ],
        502,
        "upstream_invalid_response",
        1,
        stream=True,
    ),
    "stream-non-object-chunk": Case(
        [RawStream([START, _sse(b"5")])], 502, "upstream_invalid_response", 1, stream=True
    ),
    "stream-ends-without-finish": Case([RawStream([START])], 502, "upstream_error", 1, stream=True),
}


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("faults")
    base = scripted_upstream_server.base_url
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    models = [
        model_table("m", base),
        model_table("an", base, provider="anthropic"),
        model_table("slow", base, timeout_s=0.5),
        model_table("dead", f"http://127.0.0.1:{free_port()}/v1"),
    ]
    gateway = start_gateway(
        workdir, models, server={"request_timeout_s": 5.0, "upstream_retries": 2}
    )
    try:
        yield gateway
    finally:
        gateway.stop()


def _outcome(r: httpx.Response, stream: bool) -> tuple[int, str | None]:
    """(status, error code) as the client sees it; a committed stream's in-band error
    counts as its code with the status the ledger records for it."""
    if not stream or r.status_code != 200:
        return r.status_code, (r.json()["error"]["code"] if r.status_code >= 400 else None)
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    if events and events[-1] == "[DONE]":
        return 200, None
    error = orjson.loads(events[-1])["error"]
    return -1, error["code"]


@pytest.mark.parametrize("name", list(CASES))
def test_fault(name: str, gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    case = CASES[name]
    upstream.queue(*case.steps)
    body = chat_body(case.model, stream=case.stream)
    if case.stream or case.steps[:1] == [TEXT]:
        body["tools"] = []
    before = scrape(gw.base_url)
    r = httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=body,
        timeout=20,
        headers={"authorization": f"Bearer {gw.api_key}"},
    )
    status, code = _outcome(r, case.stream)
    # a request that waited out the 5 s request deadline would end in its 504 instead
    assert code == case.code
    assert status in (case.status, -1)
    assert len(upstream.requests) == case.calls
    assert upstream.pending == 0  # every scripted step was consumed: no extra retry left
    if case.min_gap_s:
        first, second = upstream.requests[:2]
        assert second.received_at - first.received_at >= case.min_gap_s * 0.9
    rid = r.headers["x-request-id"]
    row = ledger_rows(gw, [rid])[rid]
    assert (row["status"], row["error_code"]) == (case.status, case.code)
    assert row["streamed"] == int(case.stream)
    # every attempt that reached (or tried to reach) the upstream is billed
    assert row["upstream_calls"] == (case.calls if case.attempts is None else case.attempts)
    after = scrape(gw.base_url)
    for reason in ("connect", "429", "502", "503", "529"):
        series = ("syntic_upstream_retries_total", (("model", case.model), ("reason", reason)))
        assert after.get(series, 0) - before.get(series, 0) == case.retried.get(reason, 0)


def test_each_request_has_exactly_one_ledger_row(gw: GatewayProcess) -> None:
    ids = [r["request_id"] for r in all_rows(gw)]
    assert len(ids) >= len(CASES)
    assert len(ids) == len(set(ids))


def test_upstream_down_fails_fast_without_pile_up(gw: GatewayProcess) -> None:
    """32 concurrent requests to a dead upstream: each fails fast (connect refused,
    bounded retries), none waits behind the others."""
    import concurrent.futures

    def post(_: int) -> int:
        r = httpx.post(
            gw.base_url + "/v1/chat/completions",
            json=chat_body("dead"),
            headers={"authorization": f"Bearer {gw.api_key}"},
            timeout=20,
        )
        return r.status_code

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(post, range(32)))
    # 502, not the 504 of the 5 s request deadline: none waited behind the others (the
    # speed itself is the benchmarks' business)
    assert set(results) == {502}
