"""A bounded mixed load: 1,000 requests at concurrency 32 mixing valid, invalid,
hostile and oversized inputs while the upstream misbehaves on cue (chosen per request by
the scripted upstream's responder). Acceptance: zero 5xx caused by input (upstream-caused
502/504 allowed and counted), every request in the ledger by its request id, no
duplicates."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.reliability.helpers import all_rows, ledger_rows
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.openai_helpers import BAD_ARGS, GOOD_ARGS, REFUND_SCHEMA, refund_tool
from tests.support.scripted_upstream import (
    Call,
    Drop,
    HttpError,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    Step,
)

TOTAL = 1000
CONCURRENCY = 32
BODY_LIMIT = 64 * 1024
HUGE_ARGS = '{"note": "' + "x" * 40_000 + '"}'


def _cue(request: RecordedRequest) -> str:
    messages = (request.body or {}).get("messages") or [{}]
    text = messages[0].get("content") or ""
    return text.removeprefix("cue:") if isinstance(text, str) else ""


def responder(request: RecordedRequest) -> Step:
    """The upstream's behaviour, cued by the first message of each request."""
    cue = _cue(request)
    body = request.body or {}
    correcting = any(m.get("role") == "tool" for m in body.get("messages") or ())
    steps: dict[str, Callable[[], Step]] = {
        "good": lambda: Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
        "fixable": lambda: Reply(
            tool_calls=[Call("create_refund", GOOD_ARGS if correcting else BAD_ARGS)]
        ),
        "hopeless": lambda: Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
        "text": lambda: Reply(content="hello there", fragment=3),
        "huge-args": lambda: Reply(tool_calls=[Call("create_refund", HUGE_ARGS)]),
        "deep-args": lambda: Reply(tool_calls=[Call("create_refund", "[" * 5000)]),
        "503": lambda: HttpError(503),
        "500": lambda: HttpError(500),
        "drop": lambda: Drop(),
        "slow": lambda: Reply(content="late", delay=1.0),
        "stall": lambda: Reply(content="a b c d e f g", fragment=2, stall_after=3),
    }
    return steps.get(cue, steps["good"])()


@dataclass(frozen=True)
class Kind:
    """One kind of request: what to send, and which statuses are acceptable."""

    name: str
    build: Callable[[GatewayProcess], tuple[bytes, dict[str, str]]]
    ok: frozenset[int]
    upstream_fault: bool = False  # 5xx here are the upstream's doing


def _chat(
    cue: str, *, model: str = "m", stream: bool = False, tools: Any = None, **extra: Any
) -> Callable[[GatewayProcess], tuple[bytes, dict[str, str]]]:
    def build(gw: GatewayProcess) -> tuple[bytes, dict[str, str]]:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": f"cue:{cue}"}],
            "tools": [refund_tool()] if tools is None else tools,
            "stream": stream,
            **extra,
        }
        return orjson.dumps(body), {"authorization": f"Bearer {gw.api_key}"}

    return build


def _raw(
    content: bytes, auth: bool = True
) -> Callable[[GatewayProcess], tuple[bytes, dict[str, str]]]:
    def build(gw: GatewayProcess) -> tuple[bytes, dict[str, str]]:
        return content, ({"authorization": f"Bearer {gw.api_key}"} if auth else {})

    return build


HOSTILE_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "string", "pattern": "(a+)+$"},
        "b": {"$ref": "http://169.254.169.254/x"},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}
NOT_STRICT = {k: v for k, v in REFUND_SCHEMA.items() if k != "additionalProperties"}

KINDS = [
    Kind("valid", _chat("good"), frozenset({200})),
    Kind("corrected", _chat("fixable"), frozenset({200})),
    Kind("still-invalid", _chat("hopeless"), frozenset({422})),
    Kind("stream", _chat("text", stream=True, tools=[]), frozenset({200})),
    Kind("stream-strict", _chat("fixable", stream=True), frozenset({200})),
    Kind("bad-json", _raw(b'{"model": "m", "messages": [}'), frozenset({400})),
    Kind("wrong-shape", _raw(b'{"model": 7, "messages": "x"}'), frozenset({400})),
    Kind("not-strict", _chat("good", tools=[refund_tool(schema=NOT_STRICT)]), frozenset({400})),
    Kind(
        "hostile-schema",
        _chat("good", tools=[refund_tool(schema=HOSTILE_SCHEMA)]),
        frozenset({400, 422, 200}),
    ),
    Kind("unknown-model", _chat("good", model="nope"), frozenset({404})),
    Kind(
        "oversized",
        _raw(b'{"model": "m", "pad": "' + b"x" * (2 * BODY_LIMIT) + b'"}'),
        frozenset({413}),
    ),
    Kind("no-auth", _raw(b"{}", auth=False), frozenset({401})),
    Kind("deep-args", _chat("deep-args"), frozenset({422})),
    Kind("huge-args", _chat("huge-args"), frozenset({502}), upstream_fault=True),
    Kind("upstream-503", _chat("503"), frozenset({502}), upstream_fault=True),
    Kind("upstream-500", _chat("500"), frozenset({502}), upstream_fault=True),
    Kind("upstream-drop", _chat("drop"), frozenset({502}), upstream_fault=True),
    Kind("upstream-slow", _chat("slow", model="slow"), frozenset({504}), upstream_fault=True),
    Kind(
        "stream-stall",
        _chat("stall", model="slow", stream=True, tools=[]),
        frozenset({200, 504}),
        upstream_fault=True,
    ),  # in-band error after commit
]
WEIGHTS = {"valid": 6, "corrected": 3, "stream": 2, "stream-strict": 2}


@pytest.fixture(scope="module")
def load_gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("load")
    base = scripted_upstream_server.base_url
    models = [model_table("m", base), model_table("slow", base, timeout_s=0.4)]
    # A pooled client connection left idle past the server's keep-alive timeout races the
    # server's close when it is picked again (HTTP/1.1's own race, which clients retry for
    # idempotent requests only); here the load's ebb and flow must not decide the verdict.
    gateway = start_gateway(
        workdir,
        models,
        server={
            "max_body_bytes": BODY_LIMIT,
            "max_argument_bytes": 16 * 1024,
            "keepalive_timeout_s": 120,
        },
    )
    try:
        yield gateway
    finally:
        gateway.stop()


def _plan() -> list[Kind]:
    weighted = [k for k in KINDS for _ in range(WEIGHTS.get(k.name, 1))]
    return [weighted[i % len(weighted)] for i in range(TOTAL)]


SAMPLES: list[str] = []  # bodies of unexpected answers, for the failure message


async def _run(gw: GatewayProcess, plan: list[Kind]) -> list[tuple[Kind, int, str, float]]:
    gate = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=gw.base_url, limits=limits, timeout=30) as client:

        async def one(kind: Kind) -> tuple[Kind, int, str, float]:
            content, headers = kind.build(gw)
            headers["content-type"] = "application/json"
            async with gate:
                started = time.monotonic()
                try:
                    r = await client.post("/v1/chat/completions", content=content, headers=headers)
                except httpx.HTTPError as exc:  # which kind of request lost its answer
                    raise AssertionError(f"{kind.name}: no answer: {exc!r}") from exc
                took = time.monotonic() - started
            status = r.status_code
            if status == 200 and b'\ndata: {"error"' in b"\n" + r.content.replace(b"\n\n", b"\n"):
                status = 504 if b"upstream_timeout" in r.content else 502  # in-band
            if status not in kind.ok:
                SAMPLES.append(f"{kind.name}: {r.text[-300:]}")
            return kind, status, r.headers["x-request-id"], took

        # Every request ends before the client closes its pool, failed ones included (a
        # connection closed under a request still running would leak its transport).
        outcomes = await asyncio.gather(*(one(k) for k in plan), return_exceptions=True)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    if failed:
        raise failed[0]
    return [o for o in outcomes if not isinstance(o, BaseException)]


def test_mixed_load(load_gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.responder = responder
    plan = _plan()
    started = time.monotonic()
    results = asyncio.run(_run(load_gw, plan))
    elapsed = time.monotonic() - started

    outcomes = collections.Counter((k.name, s) for k, s, _, _ in results)
    unexpected = {
        key: n
        for key, n in outcomes.items()
        if key[1] not in next(k for k in KINDS if k.name == key[0]).ok
    }
    input_5xx = [(k.name, s) for k, s, _, _ in results if s >= 500 and not k.upstream_fault]
    upstream_5xx = sum(1 for k, s, _, _ in results if s >= 500 and k.upstream_fault)
    print(
        f"\n{TOTAL} requests in {elapsed:.1f}s ({TOTAL / elapsed:.0f}/s), "
        f"upstream-caused 5xx: {upstream_5xx}, outcomes: {dict(sorted(outcomes.items()))}"
    )
    assert input_5xx == [], f"5xx caused by input: {collections.Counter(input_5xx)} {SAMPLES}"
    assert unexpected == {}, unexpected

    ids = [rid for _, _, rid, _ in results]
    assert len(set(ids)) == TOTAL
    rows = ledger_rows(load_gw, ids, timeout=20)  # fails listing any request not recorded
    ledger_ids = [r["request_id"] for r in all_rows(load_gw)]
    assert len(ledger_ids) == len(set(ledger_ids)) == TOTAL, "duplicate or stray rows"
    mismatched = [rid for _, s, rid, _ in results if rows[rid]["status"] != s]
    assert mismatched == [], f"{len(mismatched)} ledger statuses differ from the client's"
    print(f"ledger: {len(rows)} rows for {TOTAL} requests, 0 lost, 0 duplicates")
