"""Gateway benchmark against the floor (the mock alone), a minimal pass-through, Portkey's
gateway and LiteLLM. A script, not collected by pytest::

    .venv/bin/python tests/bench/gateway_bench.py [--duration 5] [--compare-litellm]
        [--compare-peers]

``docs/performance.md`` says how to run it and what each row means.

Real processes on loopback: a fast mock upstream (``tests/bench/mock_upstream.py``, core 1),
``syntic serve`` with every production feature on (core 0): a real key made by
``syntic keys create`` with rpm/tpm limits, so every request runs the Redis check script
(which also carries the previous requests' token settle, ``SYNTIC_REDIS_URL``), the strict
tool linted (cached) and its call validated, the batched ledger on SQLite, one JSON log
line per request, metrics. With
``--compare-litellm``, LiteLLM's proxy (its own venv under ``~/.cache/syntic-bench``,
``pip install 'litellm[proxy]'``, bounded by ``--litellm-budget``) on core 0 against the
same mock. ``wrk`` (one thread, core 1) drives each for ``--duration`` seconds. With
``--compare-peers``, ``--peer-rounds`` rounds of c32 runs alternate the gateway, the
reference pass-through with its durable record (``tests/bench/baseline_passthrough.py``),
Portkey's gateway and LiteLLM (``tests/bench/peers.py``: each installed at a pinned
version), on the small request and on the agent-sized one (``--peer-requests``), and
compare their server CPU per request as ratios of medians.

Prints one table: req/s, p50/p99 latency, added p50 versus the mock alone at the same
concurrency, server CPU microseconds per request (utime+stime from /proc), RSS. Rows:

- ``json``: non-streaming strict tool call (the full feature path);
- ``sse``: the same, streamed (the hold-back releases the call once it validates);
- ``sse-text10``/``sse-text100``: 10 and 100 text deltas; their CPU difference / 90 is the
  gateway's CPU per extra SSE event;
- ``agent``: the agent-sized request (``tests/bench/agent_request.py``: ~85 kB, 28 tools,
  5 of them strict, 40 messages), answered with a strict ``edit_file`` call;
- ``miss``: a new schema per request (lint + compile every time);
- ``fix``: the upstream's first call is invalid; one correction call (two upstream calls);
- ``stall``: hot requests while new ~400-property schemas arrive; max latency vs. without;
- ``json-tls``: ``json`` with the upstream over HTTPS (the mock serving TLS with a CA made
  at bench time by ``trustme``, which the gateway trusts through ``SSL_CERT_FILE``).

A low-rate line follows: one request every ``--low-rate-interval`` seconds over TLS, the
latency the gateway adds and whether its upstream connection was reused
(``tests/bench/low_rate.py``).

Then: time to first body byte at 1 connection (mock vs gateway; strict SSE, text SSE,
JSON), CPU per extra SSE event, and LiteLLM's throughput ratio: once from the table's
pair, then over ``--ratio-rounds`` more alternating pairs of json c32 runs (default 3) with
the ratio of their medians, and the ratio of CPU per request with the host's steal time per
round (on a shared host the machine's speed drifts by tens of percent
between runs; alternating puts both gateways under the same drift). A first line gives the
host's speed as the time of a fixed pure-Python loop on the server core (the ``machine:``
line), so figures taken on different machines can be compared. Last, each of the
targets with ``ok`` or ``MISS``; the exit status is 1 if any measured target was missed.
``run(Plan(...))`` does the same from code and returns the figures (``Result``): the
entry point ``python -m tests.bench`` uses it. Needs ``wrk`` (Debian: ``apt-get install -y
wrk``), Redis on 127.0.0.1:6379. Profile with
``tests/bench/profile_gateway.py`` (cProfile on a CPU clock, in process).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.agent_request import agent_body  # noqa: E402
from tests.bench.agent_request import messages as agent_messages  # noqa: E402
from tests.bench.agent_request import tools as agent_tools  # noqa: E402
from tests.bench.loadgen import (  # noqa: E402
    Measured,
    calibrate,
    have_wrk,
    measure,
    pin,
    rss_mb,
    steal_counters,
    steal_share,
    ttfb,
    wrk_script,
)
from tests.bench.low_rate import LowRate, low_rate  # noqa: E402
from tests.bench.mock_upstream import AGENT_ARGS, AGENT_TOOL, GOOD_ARGS  # noqa: E402
from tests.bench.peers import (  # noqa: E402
    PATH,
    Comparison,
    Peer,
    Workload,
    baseline_passthrough,
    litellm_proxy,
    peer_rounds,
    portkey_gateway,
)
from tests.bench.targets import PEER_WORKLOADS, Verdict, judge, verdict_lines  # noqa: E402
from tests.bench.tls_ca import TlsFiles, make_tls  # noqa: E402
from tests.support.gateway_proc import (  # noqa: E402
    model_table,
    start_gateway,
)

SERVER_CPU = 0
LOAD_CPU = 1

REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
        "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
        "note": {"type": ["string", "null"], "maxLength": 200},
    },
    "required": ["order_number", "amount_pence", "reason", "note"],
    "additionalProperties": False,
}
MESSAGES = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Order 582131 arrived crushed, please refund the 12.50 pot."},
]
MARK = 987654321  # replaced by a per-request counter in the cache-miss scenario


def refund_tool(schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "create_refund",
            "description": "Refund part or all of an order.",
            "strict": True,
            "parameters": schema or REFUND_SCHEMA,
        },
    }


def body(
    model: str, *, stream: bool = False, tools: bool = True, schema: dict[str, Any] | None = None
) -> str:
    payload: dict[str, Any] = {"model": model, "messages": MESSAGES}
    if tools:
        payload["tools"] = [refund_tool(schema)]
    if stream:
        payload["stream"] = True
    return orjson.dumps(payload).decode()


def miss_schema() -> dict[str, Any]:
    schema: dict[str, Any] = orjson.loads(orjson.dumps(REFUND_SCHEMA))
    schema["properties"]["note"]["maxLength"] = MARK
    return schema


def large_schema(seed: int, n: int = 400) -> dict[str, Any]:
    """A strict schema with ``n`` properties (patterns, enums, nested objects)."""
    props: dict[str, Any] = {}
    for i in range(n):
        kind = i % 4
        if kind == 0:
            props[f"s{seed}_{i}"] = {"type": "string", "pattern": f"^[a-z]{{1,{i % 9 + 1}}}$"}
        elif kind == 1:
            props[f"e{seed}_{i}"] = {"type": "string", "enum": [f"v{j}" for j in range(8)]}
        elif kind == 2:
            props[f"n{seed}_{i}"] = {"type": ["integer", "null"], "minimum": 0}
        else:
            props[f"o{seed}_{i}"] = {
                "type": "object",
                "additionalProperties": False,
                "required": ["a", "b"],
                "properties": {"a": {"type": "string"}, "b": {"type": "number"}},
            }
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


@dataclass(frozen=True, slots=True)
class Row:
    target: str
    scenario: str
    conns: int
    m: Measured
    added_ms: float | None

    def to_json(self) -> dict[str, Any]:
        w = self.m.wrk
        return {
            "target": self.target,
            "scenario": self.scenario,
            "conns": self.conns,
            "requests": w.requests,
            "rps": w.rps,
            "p50_ms": w.p50_us / 1000,
            "p99_ms": w.p99_us / 1000,
            "max_ms": w.max_us / 1000,
            "added_p50_ms": self.added_ms,
            "cpu_us_per_req": self.m.cpu_us_per_req,
            "rss_mb": self.m.rss_mb,
            "errors": w.errors,
        }


class Mock:
    """The mock upstream as a child process pinned to the load generator's core; over
    HTTPS when given ``tls`` (it serves ``tls.server``)."""

    def __init__(self, tls: TlsFiles | None = None) -> None:
        extra = [] if tls is None else ["--tls-cert", str(tls.server)]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests/bench/mock_upstream.py"),
                "--port",
                "0",
                "--cpu",
                str(LOAD_CPU),
                *extra,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.scheme = "http" if tls is None else "https"
        self.ca = None if tls is None else tls.ca

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def requests(self) -> int:
        """Completion requests the mock has answered so far."""
        with httpx.Client(verify=str(self.ca) if self.ca else True, timeout=10) as client:
            count: int = client.get(self.url + "/stats").json()["requests"]
            return count

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _models(mock_url: str, tls_url: str | None = None) -> list[dict[str, Any]]:
    """The gateway's models on the mock; ``bench-tls`` too when given the HTTPS mock."""
    base = mock_url + "/v1"
    models = [
        model_table("bench", base, upstream_model="mock-good"),
        model_table("bench-fix", base, upstream_model="mock-fix"),
        model_table("bench-text10", base, upstream_model="mock-text10"),
        model_table("bench-text100", base, upstream_model="mock-text100"),
        model_table("bench-agent", base, upstream_model="mock-agent"),
    ]
    if tls_url is not None:
        models.append(model_table("bench-tls", tls_url + "/v1", upstream_model="mock-good"))
    return models


def _headers(key: str | None) -> dict[str, str]:
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = f"Bearer {key}"
    return h


def run_target(
    target: str,
    pid: int,
    url: str,
    headers: dict[str, str],
    scenarios: list[tuple[str, int, str]],
    duration: float,
    floor: dict[tuple[str, int], float],
    rows: list[Row],
) -> None:
    for scenario, conns, payload in scenarios:
        vary = None
        if scenario == "miss":
            head, tail = payload.split(str(MARK))
            vary = (head, tail)
        script = wrk_script(headers, payload, vary=vary)
        m = measure(
            pid,
            url + "/v1/chat/completions",
            script,
            connections=conns,
            duration_s=duration,
            cpu=LOAD_CPU,
        )
        base = floor.get((_floor_of(scenario), conns))
        added = (m.wrk.p50_us - base) / 1000 if base is not None and target != "mock" else None
        if target == "mock":
            floor[(scenario, conns)] = m.wrk.p50_us
        rows.append(Row(target, scenario, conns, m, added))
        print(
            f"  {target:8} {scenario:12} c{conns:<3} {m.wrk.rps:8.0f} req/s "
            f"p50 {m.wrk.p50_us / 1000:.2f} ms  cpu {m.cpu_us_per_req:.0f} us/req"
            f"  err {m.wrk.errors}",
            file=sys.stderr,
        )


def _floor_of(scenario: str) -> str:
    return {"miss": "json", "fix": "json"}.get(scenario, scenario)


def stall(pid: int, url: str, key: str, duration: float) -> tuple[Measured, Measured, float]:
    """Hot requests at 4 connections, without and then with large new schemas arriving
    every 250 ms on another connection; returns both runs and the slowest miss (s)."""
    hot = wrk_script(_headers(key), body("bench"))
    target = url + "/v1/chat/completions"
    quiet = measure(pid, target, hot, connections=4, duration_s=duration, cpu=LOAD_CPU)
    stop = threading.Event()
    slowest = [0.0]

    def misses() -> None:
        seed = int(time.time() * 1000) % 1_000_000
        with httpx.Client(timeout=30, headers=_headers(key)) as client:
            while not stop.is_set():
                seed += 1
                t0 = time.perf_counter()
                r = client.post(target, content=body("bench", schema=large_schema(seed)))
                slowest[0] = max(slowest[0], time.perf_counter() - t0)
                if r.status_code >= 500:
                    raise RuntimeError(f"miss request failed: {r.status_code} {r.text[:200]}")
                stop.wait(0.25)

    thread = threading.Thread(target=misses, daemon=True)
    thread.start()
    busy = measure(pid, target, hot, connections=4, duration_s=duration, cpu=LOAD_CPU)
    stop.set()
    thread.join(60)
    return quiet, busy, slowest[0]


def first_bytes(mock_url: str, gw_url: str, key: str, n: int = 300) -> tuple[str, float]:
    """Median time to the first body byte at 1 connection, mock alone vs. the gateway.
    Returns the lines and the added time (ms) of the first case, a strict SSE tool call."""
    path = "/v1/chat/completions"
    cases = [
        ("strict tool call, SSE", body("mock-good", stream=True), body("bench", stream=True)),
        (
            "text, SSE",
            body("mock-text10", stream=True, tools=False),
            body("bench-text10", stream=True, tools=False),
        ),
        ("strict tool call, JSON", body("mock-good"), body("bench")),
    ]
    lines = [f"time to first byte (median of {n}, 1 connection):"]
    added: list[float] = []
    for name, direct, through in cases:
        floor = ttfb(mock_url + path, _headers(None), direct, n=n, cpu=LOAD_CPU)
        ours = ttfb(gw_url + path, _headers(key), through, n=n, cpu=LOAD_CPU)
        added.append((ours - floor) * 1000)
        lines.append(
            f"  {name}: mock {floor * 1000:.2f} ms, syntic {ours * 1000:.2f} ms "
            f"(added {added[-1]:+.2f} ms)"
        )
    return "\n" + "\n".join(lines), added[0]


def table(rows: list[Row]) -> str:
    out = [
        "| target | scenario | conns | req/s | p50 ms | p99 ms | added p50 ms "
        "| CPU us/req | RSS MB | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        w = r.m.wrk
        added = "" if r.added_ms is None else f"{r.added_ms:+.2f}"
        out.append(
            f"| {r.target} | {r.scenario} | {r.conns} | {w.rps:,.0f} | "
            f"{w.p50_us / 1000:.2f} | {w.p99_us / 1000:.2f} | {added} | "
            f"{r.m.cpu_us_per_req:,.0f} | {r.m.rss_mb:.0f} | {w.errors} |"
        )
    return "\n".join(out)


# The table's row sets, in the order they run; ``Plan.rows`` picks some.
ROW_SETS = ("json", "sse", "tls", "agent", "sse-text", "miss", "fix")


@dataclass(slots=True)
class Plan:
    """What one run measures. ``main`` builds it from the options, ``tests/bench``'s entry
    point from scenario names."""

    duration: float = 5.0
    rows: tuple[str, ...] = ROW_SETS
    ttfb: bool = True
    stall: bool = True
    low_rate_requests: int = 10
    low_rate_interval: float = 3.0
    litellm: bool = False  # LiteLLM's rows and the throughput ratio
    ratio_rounds: int = 3
    peers: tuple[str, ...] = ()  # the peer comparison's workloads: "small", "agent"
    peer_set: tuple[str, ...] = ("baseline", "portkey", "litellm")  # who syntic meets
    peer_rounds: int = 3
    light_baseline: bool = False
    litellm_budget: float = 900.0
    portkey_budget: float = 600.0
    redis_db: int = 0


@dataclass(slots=True)
class Result:
    """What one run measured: the table's rows, the extra lines' figures, the peer
    comparisons and the verdicts on the targets."""

    machine_ms: float
    rows: list[Row]
    figures: dict[str, float]
    text: str  # the lines printed after the table
    comparisons: list[Comparison]
    low_rate: LowRate | None
    verdicts: tuple[list[Verdict], list[Verdict]]

    def report(self) -> str:
        lines, _ = verdict_lines(self.verdicts)
        return (
            f"machine: {self.machine_ms:.0f} ms for the pure-Python calibration loop on "
            f"core {SERVER_CPU} (10M additions; lower is a faster machine)"
            + ("\n" + table(self.rows) if self.rows else "")
            + self.text
            + "\n"
            + "\n".join(lines)
        )

    @property
    def missed(self) -> int:
        return verdict_lines(self.verdicts)[1]

    def to_json(self) -> dict[str, Any]:
        low = self.low_rate
        return {
            "machine_ms": self.machine_ms,
            "rows": [r.to_json() for r in self.rows],
            "figures": self.figures,
            "peers": [c.to_json() for c in self.comparisons],
            "low_rate": None
            if low is None
            else {
                "requests": low.requests,
                "interval_s": low.interval_s,
                "mock_ms": low.mock_ms,
                "gateway_ms": low.gateway_ms,
                "added_p50_ms": low.added_p50_ms,
                "added_max_ms": low.added_max_ms,
                "new_upstream_connections": low.handshakes,
            },
            "targets": [v.to_json() for v in self.verdicts[0]],
            "peer_targets": [v.to_json() for v in self.verdicts[1]],
        }


def _row_plan(
    sets: tuple[str, ...], tls_json: str
) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str]], list[tuple[str, int, str]]]:
    """(the mock's rows over HTTP, over HTTPS, the gateway's rows) for the row sets."""
    json_body, sse_body = body("bench"), body("bench", stream=True)
    mock, mock_tls, gw = [], [], []
    if "json" in sets:
        mock += [("json", 1, json_body), ("json", 32, json_body)]
        gw += [("json", 1, json_body), ("json", 32, json_body)]
    if "sse" in sets:
        mock += [("sse", 1, sse_body), ("sse", 32, sse_body)]
        gw += [("sse", 1, sse_body), ("sse", 32, sse_body)]
    if "tls" in sets:
        mock_tls += [("json-tls", 1, tls_json), ("json-tls", 32, tls_json)]
        gw += [("json-tls", 1, tls_json), ("json-tls", 32, tls_json)]
    if "agent" in sets:
        mock += [("agent", 1, agent_body("mock-agent")), ("agent", 32, agent_body("mock-agent"))]
        gw += [("agent", 1, agent_body("bench-agent")), ("agent", 32, agent_body("bench-agent"))]
    if "sse-text" in sets:
        for n in (10, 100):
            mock.append((f"sse-text{n}", 32, body(f"mock-text{n}", stream=True, tools=False)))
            gw.append((f"sse-text{n}", 32, body(f"bench-text{n}", stream=True, tools=False)))
    if "miss" in sets:
        gw += [
            ("miss", 1, body("bench", schema=miss_schema())),
            ("miss", 32, body("bench", schema=miss_schema())),
        ]
    if "fix" in sets:
        gw += [("fix", 1, body("bench-fix")), ("fix", 32, body("bench-fix"))]
    return mock, mock_tls, gw


def _workloads(names: tuple[str, ...]) -> list[Workload]:
    known = {
        "small": Workload(
            "small", "small request (create_refund, 660 B, 1 strict tool)", lambda p: body(p.model)
        ),
        "agent": Workload(
            "agent",
            f"agent-sized request ({len(agent_body('m')) / 1000:.0f} "
            f"kB, {len(agent_tools())} tools, {len(agent_messages())} messages)",
            lambda p: agent_body(p.agent_model),
        ),
    }
    return [known[n] for n in names]


def run(plan: Plan) -> Result:
    """Start the mocks and the gateway, measure what ``plan`` asks, stop everything.
    Raises ``ToolMissing`` without ``wrk`` or ``trustme``."""
    if not have_wrk():
        raise ToolMissing("wrk not found: apt-get install -y wrk")
    d = plan.duration
    rows_wanted = plan.rows + (("json",) if plan.litellm and "json" not in plan.rows else ())
    workdir = Path(tempfile.mkdtemp(prefix="syntic-bench-"))
    try:
        tls = make_tls(workdir / "tls")
    except ImportError as exc:
        raise ToolMissing("trustme not found: pip install -e '.[test]'") from exc
    tls_json = body("bench-tls")
    mock_rows, tls_rows, gw_rows = _row_plan(rows_wanted, tls_json)
    rows: list[Row] = []
    floor: dict[tuple[str, int], float] = {}
    figures: dict[str, float] = {}
    comparisons: list[Comparison] = []
    slow: LowRate | None = None
    extra = ""
    mock, mock_tls = Mock(), Mock(tls)
    gw = None
    try:
        if mock_rows or tls_rows:
            print("mock upstream alone:", file=sys.stderr)
        run_target("mock", mock.proc.pid, mock.url, _headers(None), mock_rows, d, floor, rows)
        run_target(
            "mock", mock_tls.proc.pid, mock_tls.url, _headers(None), tls_rows, d, floor, rows
        )
        gw = start_gateway(
            workdir,
            _models(mock.url, mock_tls.url),
            env={
                "SYNTIC_REDIS_URL": f"redis://127.0.0.1:6379/{plan.redis_db}",
                "SSL_CERT_FILE": str(tls.ca),
            },
        )
        key = gw.create_key("bench", "--rpm", "1000000000", "--tpm", "2000000000")
        pin(gw.proc.pid, SERVER_CPU)
        _check_path(gw.base_url, key, mock_tls)
        ours = Peer("syntic", gw.proc.pid, gw.base_url, _headers(key), "bench", "bench-agent")
        rss_idle = rss_mb(gw.proc.pid)
        if gw_rows:
            print("syntic gateway:", file=sys.stderr)
        run_target("syntic", gw.proc.pid, gw.base_url, ours.headers, gw_rows, d, floor, rows)
        if plan.low_rate_requests > 0:
            print(
                f"low rate: {plan.low_rate_requests} requests every "
                f"{plan.low_rate_interval:g} s...",
                file=sys.stderr,
            )
            slow = low_rate(
                mock_tls.url,
                tls.ca,
                gw.base_url,
                ours.headers,
                body("bench"),
                tls_json,
                requests=plan.low_rate_requests,
                interval_s=plan.low_rate_interval,
                cpu=LOAD_CPU,
            )
            extra += "\n" + slow.line()
        if plan.ttfb:
            text, figures["ttfb"] = first_bytes(mock.url, gw.base_url, key)
            extra += text
        syntic_rows = {(r.scenario, r.conns): r for r in rows if r.target == "syntic"}
        if ("sse-text10", 32) in syntic_rows:
            per_event = figures["sse_event"] = (
                syntic_rows["sse-text100", 32].m.cpu_us_per_req
                - syntic_rows["sse-text10", 32].m.cpu_us_per_req
            ) / 90
            extra += f"\nCPU per extra SSE event (text100 - text10) / 90: {per_event:.1f} us"
        if plan.stall:
            quiet, busy, slowest = stall(gw.proc.pid, gw.base_url, key, d)
            figures["stall"] = (busy.wrk.max_us - quiet.wrk.max_us) / 1000
            extra += (
                f"\nstall: hot p99/max {quiet.wrk.p99_us / 1000:.2f}/{quiet.wrk.max_us / 1000:.2f}"
                f" ms alone, {busy.wrk.p99_us / 1000:.2f}/{busy.wrk.max_us / 1000:.2f} ms while"
                f" 400-property schemas arrive (slowest miss request {slowest * 1000:.0f} ms)"
            )
        if gw_rows:
            extra += f"\nsyntic RSS idle {rss_idle:.0f} MB"
        with contextlib.ExitStack() as peers:
            lite = None
            if plan.litellm or (plan.peers and "litellm" in plan.peer_set):
                lite = peers.enter_context(litellm_proxy(mock.url, plan.litellm_budget))
                if lite is not None:
                    pin(lite.pid, SERVER_CPU)
            if plan.litellm and lite is not None:
                base = [s for s in gw_rows if s[0] in ("json", "sse")]
                extra += compare_litellm(
                    ours, lite, base, d, plan.ratio_rounds, floor, rows, figures
                )
            if plan.peers:
                workloads = _workloads(plan.peers)
                contenders = [ours]
                starts = []
                if "baseline" in plan.peer_set:
                    starts.append(baseline_passthrough(mock.url))
                if plan.light_baseline:
                    starts.append(baseline_passthrough(mock.url, durable=False))
                if "portkey" in plan.peer_set:
                    starts.append(portkey_gateway(mock.url, plan.portkey_budget))
                for start in starts:
                    peer = peers.enter_context(start)
                    if peer is not None:
                        pin(peer.pid, SERVER_CPU)
                        contenders.append(peer)
                if lite is not None and "litellm" in plan.peer_set:
                    contenders.append(lite)
                for peer in contenders[1:]:
                    _check_peer(peer, mock, agent="agent" in plan.peers)
                comparisons = peer_rounds(contenders, workloads, d, plan.peer_rounds, cpu=LOAD_CPU)
                for comparison in comparisons:
                    extra += comparison.report()
                    figures.update(comparison.figures())
        machine = calibrate(SERVER_CPU)
    finally:
        if gw is not None:
            gw.stop()
        mock.stop()
        mock_tls.stop()
    ours_rows = {(r.scenario, r.conns): r for r in rows if r.target == "syntic"}
    if ("json", 32) in ours_rows:
        figures["rps32"] = ours_rows["json", 32].m.wrk.rps
        figures["cpu32"] = ours_rows["json", 32].m.cpu_us_per_req
    if ("json", 1) in ours_rows and ours_rows["json", 1].added_ms is not None:
        figures["added1"] = ours_rows["json", 1].added_ms or 0.0
    if ours_rows:
        figures["rss"] = max(r.m.rss_mb for r in ours_rows.values())
    return Result(machine, rows, figures, extra, comparisons, slow, judge(figures))


class ToolMissing(RuntimeError):
    """A tool the benchmark needs is not installed (exit status 2)."""


def main() -> int:
    parser = argparse.ArgumentParser(description="Syntic gateway benchmark")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--compare-litellm", action="store_true")
    parser.add_argument(
        "--litellm-budget",
        type=float,
        default=900.0,
        help="seconds allowed to install + start LiteLLM",
    )
    parser.add_argument("--redis-db", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="json and json-tls rows only")
    parser.add_argument(
        "--ratio-rounds",
        type=int,
        default=3,
        help="with --compare-litellm: extra alternating json c32 runs of "
        "syntic and LiteLLM for the throughput ratio (0: none)",
    )
    parser.add_argument(
        "--compare-peers",
        action="store_true",
        help="CPU per request against the pass-through with a durable "
        "record, Portkey and LiteLLM, over alternating c32 rounds",
    )
    parser.add_argument(
        "--peer-requests",
        default="small,agent",
        help="with --compare-peers: the requests compared (small, agent)",
    )
    parser.add_argument(
        "--peer-rounds",
        type=int,
        default=3,
        help="with --compare-peers: rounds (each runs every contender once per request)",
    )
    parser.add_argument(
        "--light-baseline",
        action="store_true",
        help="with --compare-peers: also the pass-through without a durable "
        "record (reported, not judged)",
    )
    parser.add_argument(
        "--portkey-budget",
        type=float,
        default=600.0,
        help="seconds allowed to install + start Portkey's gateway",
    )
    parser.add_argument(
        "--low-rate-interval",
        type=float,
        default=3.0,
        help="seconds between the low-rate row's requests",
    )
    parser.add_argument(
        "--low-rate-requests",
        type=int,
        default=10,
        help="requests in the low-rate row (0: skip it)",
    )
    ns = parser.parse_args()
    workloads = tuple(w for w in ns.peer_requests.split(",") if w)
    if set(workloads) - set(PEER_WORKLOADS):
        parser.error(f"--peer-requests: one of {', '.join(PEER_WORKLOADS)}")
    plan = Plan(
        duration=ns.duration,
        rows=("json", "tls") if ns.quick else ROW_SETS,
        ttfb=not ns.quick,
        stall=not ns.quick,
        low_rate_requests=ns.low_rate_requests,
        low_rate_interval=ns.low_rate_interval,
        litellm=ns.compare_litellm,
        ratio_rounds=ns.ratio_rounds,
        peers=workloads if ns.compare_peers else (),
        peer_rounds=ns.peer_rounds,
        light_baseline=ns.light_baseline,
        litellm_budget=ns.litellm_budget,
        portkey_budget=ns.portkey_budget,
        redis_db=ns.redis_db,
    )
    try:
        result = run(plan)
    except ToolMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    print(result.report())
    return 1 if result.missed else 0


def compare_litellm(
    ours: Peer,
    lite: Peer,
    scenarios: list[tuple[str, int, str]],
    duration: float,
    rounds: int,
    floor: dict[tuple[str, int], float],
    rows: list[Row],
    figures: dict[str, float],
) -> str:
    """LiteLLM's rows in the table, then the throughput ratio over alternating rounds."""
    print("litellm proxy:", file=sys.stderr)
    # LiteLLM's model is named like ours ("bench"): the same bodies.
    run_target("litellm", lite.pid, lite.url, lite.headers, scenarios, duration, floor, rows)
    mine = next(r for r in rows if r.target == "syntic" and r.scenario == "json" and r.conns == 32)
    theirs = next(
        r for r in rows if r.target == "litellm" and r.scenario == "json" and r.conns == 32
    )
    ratio = figures["litellm"] = mine.m.wrk.rps / max(theirs.m.wrk.rps, 1e-9)
    text = f"\nthroughput vs LiteLLM (json, 32 conns): {ratio:.0f}x"
    if rounds > 0:
        more, figures["litellm"] = ratio_rounds(
            ours, lite, duration, rounds, first=(mine.m.wrk.rps, theirs.m.wrk.rps)
        )
        text += more
    return text


def ratio_rounds(
    ours: Peer,
    theirs: Peer,
    duration: float,
    rounds: int,
    *,
    first: tuple[float, float],
) -> tuple[str, float]:
    """The LiteLLM ratio again over ``rounds`` alternating json c32 runs of each (the host's
    speed drifts between runs on a shared machine; alternating puts both under the same
    drift). Returns the per-round ratios and the ratio of the medians, the main table's
    pair included."""
    script_ours = wrk_script(ours.headers, body(ours.model))
    script_theirs = wrk_script(theirs.headers, body(theirs.model))
    pairs = [first]
    cpu_ratios: list[float] = []
    for i in range(rounds):
        steal_before = steal_counters()
        a = measure(
            ours.pid,
            ours.url + PATH,
            script_ours,
            connections=32,
            duration_s=duration,
            cpu=LOAD_CPU,
        )
        b = measure(
            theirs.pid,
            theirs.url + PATH,
            script_theirs,
            connections=32,
            duration_s=duration,
            cpu=LOAD_CPU,
        )
        steal = steal_share(steal_before)
        pairs.append((a.wrk.rps, b.wrk.rps))
        cpu_ratios.append(b.cpu_us_per_req / max(a.cpu_us_per_req, 1e-9))
        print(
            f"  ratio round {i + 1}: syntic {a.wrk.rps:.0f} req/s "
            f"({a.cpu_us_per_req:.0f} us/req), litellm {b.wrk.rps:.0f} req/s "
            f"({b.cpu_us_per_req:.0f} us/req): {a.wrk.rps / max(b.wrk.rps, 1e-9):.1f}x; "
            f"CPU per request {cpu_ratios[-1]:.1f}x; host steal {steal:.1f}%",
            file=sys.stderr,
        )
    each = ", ".join(f"{a / max(b, 1e-9):.0f}x" for a, b in pairs)
    median = statistics.median(a for a, _ in pairs) / max(
        statistics.median(b for _, b in pairs), 1e-9
    )
    return (
        f"\nthroughput vs LiteLLM over {len(pairs)} alternating json c32 pairs: {each}; "
        f"ratio of medians {median:.0f}x"
        f"\nCPU per request, LiteLLM / syntic, over the {len(cpu_ratios)} rounds: "
        + ", ".join(f"{r:.0f}x" for r in cpu_ratios)
        + f"; median {statistics.median(cpu_ratios):.0f}x (the throughput one core could"
        " give each, whatever the host's stalls)"
    ), median


def _agent_call_ok(answer: Any) -> bool:
    call = answer["choices"][0]["message"]["tool_calls"][0]["function"]
    return bool(
        call["name"] == AGENT_TOOL and orjson.loads(call["arguments"]) == orjson.loads(AGENT_ARGS)
    )


def _check_path(base_url: str, key: str, mock_tls: Mock) -> None:
    """Fail fast unless the full path answers: a valid call, a corrected one, a valid one
    from the HTTPS upstream (which counts it), and the agent-sized request's call."""
    tls_before = mock_tls.requests()
    with httpx.Client(timeout=10, headers=_headers(key)) as client:
        for model, retries in (("bench", "0"), ("bench-fix", "1"), ("bench-tls", "0")):
            r = client.post(base_url + PATH, content=body(model))
            r.raise_for_status()
            call = r.json()["choices"][0]["message"]["tool_calls"][0]
            assert orjson.loads(call["function"]["arguments"]) == orjson.loads(GOOD_ARGS), call
            assert r.headers["x-syntic-schema-retries"] == retries, r.headers
            assert "x-ratelimit-remaining-requests" in r.headers, r.headers
        r = client.post(base_url + PATH, content=agent_body("bench-agent"))
        if r.status_code != 200 or not _agent_call_ok(r.json()):
            raise RuntimeError(f"the agent-sized request: {r.status_code} {r.text[:500]}")
        assert r.headers["x-syntic-schema-retries"] == "0", r.headers
    assert mock_tls.requests() == tls_before + 1, "the HTTPS upstream did not answer"


def _check_peer(peer: Peer, mock: Mock, *, agent: bool) -> None:
    """Fail fast unless ``peer`` answers with the mock's own completion, fetched from the
    mock (its request count moves by one); the agent-sized request's too with ``agent``."""
    before = mock.requests()
    r = httpx.post(peer.url + PATH, content=body(peer.model), headers=peer.headers, timeout=30)
    if r.status_code != 200:
        raise RuntimeError(f"{peer.name} answered {r.status_code}: {r.text[:500]}")
    answer = r.json()
    call = answer["choices"][0]["message"]["tool_calls"][0]
    if answer.get("id") != "chatcmpl-mock" or orjson.loads(
        call["function"]["arguments"]
    ) != orjson.loads(GOOD_ARGS):
        raise RuntimeError(f"{peer.name} did not return the mock's answer: {r.text[:500]}")
    if agent:
        r = httpx.post(
            peer.url + PATH, content=agent_body(peer.agent_model), headers=peer.headers, timeout=30
        )
        if r.status_code != 200 or not _agent_call_ok(r.json()):
            raise RuntimeError(f"{peer.name}, agent-sized request: {r.status_code} {r.text[:500]}")
    if mock.requests() != before + 1 + agent:
        raise RuntimeError(f"{peer.name}'s answer did not come from the mock")


if __name__ == "__main__":
    sys.exit(main())
