"""Streaming hold-back benchmark. A script, not collected by pytest::

    .venv/bin/python tests/bench/stream_bench.py [--n 200] [--chunk-delay-ms 0]

Real servers on loopback: the scripted upstream (in a child process, so its event loop does
not share a GIL with the client) and ``syntic serve`` (subprocess). For each scenario the
same scripted reply is streamed N times straight from the upstream and N times through the
gateway, each request on a fresh connection, and the client records when the first content
byte and the first tool-call byte arrived. Reported (medians, p90 in brackets):

- added time to first byte for text: gateway - direct (the proxy hop; no hold-back applies);
- added delay of a strict tool call's first fragment: gateway - direct. The hold-back must
  wait for the call's last fragment; the upstream's own first->last fragment time is shown;
- hold-back overhead: through the same gateway, the strict call's first fragment minus the
  same call's LAST fragment when the tool is not strict (passed through as it arrives), i.e.
  what holding + validating + releasing adds; target <= validation time + 1 ms;
- in-process figures: validation of the call, hold-back CPU per passed-through event, and the
  SSE encoder's CPU per event (target: <= 25 us per extra SSE event).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gateway.canonical import (  # noqa: E402
    ChatRequest,
    Finish,
    Message,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
    UsageReport,
)
from gateway.context import Tally  # noqa: E402
from gateway.dialects.openai.stream import ChunkEncoder  # noqa: E402
from gateway.enforcement.check import StrictPlan  # noqa: E402
from gateway.enforcement.holdback import HoldBack  # noqa: E402
from tests.support.gateway_proc import model_table, start_gateway  # noqa: E402
from tests.support.openai_helpers import GOOD_ARGS, MESSAGES, REFUND_SCHEMA, refund_tool  # noqa: E402
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream  # noqa: E402

TEXT = "Order 582131 arrived crushed; I am refunding the pot now. " * 2


def _upstream_child(conn: Connection, steps: list[Reply]) -> None:
    with ScriptedUpstream() as up:
        up.queue(*steps)
        conn.send(up.base_url)
        conn.recv()  # stop


def _timed_stream(
    url: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[float, float, float]:
    """Seconds to the first content byte, the first and the last tool-call byte; one fresh
    connection per request."""
    nan = float("nan")
    first_text = first_tool = last_tool = nan
    with httpx.Client(timeout=30) as client:
        t0 = time.perf_counter()
        with client.stream("POST", url, json=body, headers=headers) as r:
            r.raise_for_status()
            for data in r.iter_raw():
                now = time.perf_counter() - t0
                if first_text != first_text and b'"content":"' in data.replace(
                    b'"content":""', b""
                ):
                    first_text = now
                if b'"tool_calls"' in data:
                    if first_tool != first_tool:
                        first_tool = now
                    last_tool = now
    return first_text, first_tool, last_tool


def _stats(xs: list[float]) -> str:
    xs = sorted(x * 1000 for x in xs)
    p90 = xs[max(0, int(len(xs) * 0.9) - 1)]
    return f"{statistics.median(xs):7.3f} ms [p90 {p90:7.3f}]"


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def _run(n: int, chunk_delay: float) -> None:
    text_step = Reply(content=TEXT, fragment=8, chunk_delay=chunk_delay)
    call_step = Reply(
        tool_calls=[Call("create_refund", GOOD_ARGS, id="call_b")],
        fragment=8,
        chunk_delay=chunk_delay,
    )
    # per round: direct text, direct call, gateway text, gateway strict, gateway non-strict
    steps = [text_step, call_step, text_step, call_step, call_step] * n
    parent, child = mp.Pipe()
    proc = mp.Process(target=_upstream_child, args=(child, steps), daemon=True)
    proc.start()
    base: str = parent.recv()
    work = Path(tempfile.mkdtemp(prefix="stream-bench-"))
    gw = start_gateway(work, [model_table("bench", base)])
    rows: list[tuple[float, ...]] = []
    try:
        body = {"model": "bench", "messages": MESSAGES, "stream": True, "tools": [refund_tool()]}
        plain = {**body, "tools": [refund_tool(strict=False)]}
        up = base + "/chat/completions"
        gw_url = gw.base_url + "/v1/chat/completions"
        auth = {"authorization": f"Bearer {gw.api_key}"}
        for _ in range(n):
            text = _timed_stream(up, body, {})
            call = _timed_stream(up, body, {})
            gw_text = _timed_stream(gw_url, body, auth)
            gw_strict = _timed_stream(gw_url, body, auth)
            gw_plain = _timed_stream(gw_url, plain, auth)
            rows.append(
                (text[0], call[1], call[2], gw_text[0], gw_strict[1], gw_plain[1], gw_plain[2])
            )
    finally:
        gw.stop()
        parent.send("stop")
        proc.join(5)
    cols = [list(c) for c in zip(*rows, strict=True)]
    d_text, d_first, d_last, g_text, g_strict, p_first, p_last = cols
    hop = _med(g_text) - _med(d_text)
    print(f"== end to end (n={n}, upstream chunk delay {chunk_delay * 1000:g} ms)")
    print(f"text first byte        direct  {_stats(d_text)}")
    print(f"text first byte        gateway {_stats(g_text)}")
    print(f"  added TTFB for text (proxy hop; text is never held): {hop * 1000:7.3f} ms")
    print(f"call first fragment    direct  {_stats(d_first)}  last {_stats(d_last)}")
    print(f"strict call first frag gateway {_stats(g_strict)}")
    print(f"plain call  first frag gateway {_stats(p_first)}  last {_stats(p_last)}")
    print(
        f"  added delay of the strict call's first fragment vs direct: "
        f"{(_med(g_strict) - _med(d_first)) * 1000:7.3f} ms"
    )
    print(
        f"    upstream's own first->last fragment (inherent):        "
        f"{(_med(d_last) - _med(d_first)) * 1000:7.3f} ms"
    )
    print(
        f"  hold-back overhead = strict first - plain last (same hop): "
        f"{(_med(g_strict) - _med(p_last)) * 1000:7.3f} ms"
    )
    paired = [g - p for g, p in zip(g_strict, p_last, strict=True)]
    print(f"    (per-round difference of the same: median {_med(paired) * 1000:7.3f} ms)")


# -- in process --------------------------------------------------------------------------


async def _events(n_text: int) -> AsyncIterator[StreamEvent]:
    for _ in range(n_text):
        yield TextDelta("token ")
    yield ToolCallStart(0, "call_1", "create_refund")
    for i in range(0, len(GOOD_ARGS), 8):
        yield ToolCallDelta(0, GOOD_ARGS[i : i + 8])
    yield Finish("tool_calls")
    yield UsageReport(Usage(10, 5))


def _per_call(fn: Callable[[], object], reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def _in_process() -> None:
    import validator

    compiled = validator.compile(REFUND_SCHEMA)
    validate = _per_call(lambda: compiled.validate_json(GOOD_ARGS), 20000)
    plan = StrictPlan(tools={"create_refund": compiled}, tool_names=frozenset({"create_refund"}))
    request = ChatRequest(
        model="m",
        messages=(Message("user", (TextPart("hi"),)),),
        tools=(ToolSpec("create_refund", REFUND_SCHEMA, strict=True),),
    )
    del request

    async def no_correction(call: Any, cut: Any) -> Any:
        raise AssertionError("valid call needs no correction")

    async def drain(n_text: int) -> int:
        hb = HoldBack(_events(n_text), plan=plan, tally=Tally(), enforce_call=no_correction)
        return sum([len(b) async for b in hb.batches()])

    async def timed(n_text: int, reps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(reps):
            await drain(n_text)
        return (time.perf_counter() - t0) / reps

    loop = asyncio.new_event_loop()
    small = loop.run_until_complete(timed(0, 2000))
    big = loop.run_until_complete(timed(1000, 50))
    loop.close()
    per_event = (big - small) / 1000
    enc = ChunkEncoder(completion_id="chatcmpl-x", model="m", created=1, include_usage=True)
    text_ev = [TextDelta("token ")]
    encode = _per_call(lambda: enc.encode(text_ev), 50000)
    print("== in process")
    print(f"validate create_refund arguments (cached schema): {validate * 1e6:7.2f} us")
    print(f"hold-back, whole stream with one strict call:     {small * 1e6:7.2f} us")
    print(f"hold-back CPU per passed-through text event:       {per_event * 1e6:7.2f} us")
    print(f"SSE encode per text event (ChunkEncoder):         {encode * 1e6:7.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--chunk-delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    _in_process()
    _run(args.n, args.chunk_delay_ms / 1000)


if __name__ == "__main__":
    main()
