"""The benchmark's one entry point: named scenarios, one JSON result file per run::

    python -m tests.bench list
    python -m tests.bench run json agent-sized [--duration 5] [--json out.json]
    python -m tests.bench run peers --duration 5 --rounds 5 --json peers.json
    python -m tests.bench check out.json      # the file is a complete, valid result

The gateway's scenarios (json, sse, tls, agent-sized, peers, ...) share one run of
``gateway_bench.run``: one mock, one gateway, one ``Plan`` made of every scenario asked
for. The component scenarios run their script as it runs alone (its defaults) and keep
its output. The result file (default ``test-artifacts/bench/<UTC time>.json``) holds the
host, the commit, the command and every figure; the report goes to stdout, progress to
stderr. Exit status: 0, or 1 if a scenario failed (or, with ``--fail-on-miss``, a measured
target was missed), 2 if a tool is missing. ``docs/performance.md`` says what each figure
means.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench.gateway_bench import Plan, ToolMissing, run
from tests.bench.targets import PEER_WORKLOADS

ROOT = Path(__file__).resolve().parents[2]
FORMAT = "syntic-bench-result/1"


@dataclass(frozen=True, slots=True)
class Options:
    duration: float
    rounds: int
    low_rate_requests: int
    low_rate_interval: float
    light_baseline: bool
    redis_db: int


@dataclass(frozen=True, slots=True)
class GatewayScenario:
    """A part of the one gateway run: what it adds to the ``Plan``."""

    help: str
    apply: Callable[[Plan, Options], None]


@dataclass(frozen=True, slots=True)
class ScriptScenario:
    """A component script run alone: its arguments after the script path."""

    help: str
    script: str
    args: Callable[[Options], list[str]]


def _rows(*sets: str) -> Callable[[Plan, Options], None]:
    def apply(plan: Plan, _o: Options) -> None:
        plan.rows += tuple(s for s in sets if s not in plan.rows)

    return apply


def _peers(*workloads: str) -> Callable[[Plan, Options], None]:
    def apply(plan: Plan, o: Options) -> None:
        plan.peers += tuple(w for w in workloads if w not in plan.peers)
        plan.peer_rounds = o.rounds
        plan.light_baseline = o.light_baseline

    return apply


def _local_peers(plan: Plan, o: Options) -> None:
    _peers(*PEER_WORKLOADS)(plan, o)
    plan.peer_set, plan.light_baseline = ("baseline",), True


def _low_rate(plan: Plan, o: Options) -> None:
    plan.low_rate_requests, plan.low_rate_interval = o.low_rate_requests, o.low_rate_interval


def _ttfb(plan: Plan, _o: Options) -> None:
    plan.ttfb = True


def _stall(plan: Plan, _o: Options) -> None:
    plan.stall = True


def _litellm(plan: Plan, o: Options) -> None:
    plan.litellm, plan.ratio_rounds = True, o.rounds
    _rows("json", "sse")(plan, o)


def _all(plan: Plan, o: Options) -> None:
    for part in (
        _rows("json", "sse", "tls", "agent", "sse-text", "miss", "fix"),
        _ttfb,
        _stall,
        _low_rate,
    ):
        part(plan, o)


def _quick(plan: Plan, o: Options) -> None:
    _rows("json", "tls")(plan, o)
    _low_rate(plan, o)


def _none(_o: Options) -> list[str]:
    return []


GATEWAY: dict[str, GatewayScenario] = {
    "json": GatewayScenario(
        "a strict tool call, the full feature path, c1 and c32 (and the mock alone)", _rows("json")
    ),
    "sse": GatewayScenario("the same call streamed, c1 and c32", _rows("sse")),
    "sse-text": GatewayScenario(
        "10 and 100 text deltas: CPU per extra SSE event", _rows("sse-text")
    ),
    "tls": GatewayScenario("json with the upstream over HTTPS, c1 and c32", _rows("tls")),
    "agent-sized": GatewayScenario(
        "the agent-sized request (~85 kB, 28 tools, 40 messages), c1 and c32", _rows("agent")
    ),
    "miss": GatewayScenario("a new schema on every request (lint + compile)", _rows("miss")),
    "fix": GatewayScenario("one correction call per request", _rows("fix")),
    "ttfb": GatewayScenario("time to first byte, mock vs gateway, 300 sequential requests", _ttfb),
    "stall": GatewayScenario("hot requests while ~400-property schemas arrive", _stall),
    "low-rate": GatewayScenario(
        "one request every --low-rate-interval s over TLS: added "
        "latency, upstream connection reuse",
        _low_rate,
    ),
    "litellm": GatewayScenario(
        "LiteLLM's json/sse rows and the throughput ratio over --rounds pairs", _litellm
    ),
    "peers": GatewayScenario(
        "CPU per request against the pass-through with a durable "
        "record, Portkey and LiteLLM, small and agent-sized requests, "
        "--rounds alternating rounds",
        _peers(*PEER_WORKLOADS),
    ),
    "peers-small": GatewayScenario(
        "the peer comparison on the small request only", _peers("small")
    ),
    "peers-agent": GatewayScenario(
        "the peer comparison on the agent-sized request only", _peers("agent")
    ),
    "peers-local": GatewayScenario(
        "the peer comparison against the pass-through only, "
        "with and without its record (nothing to install)",
        _local_peers,
    ),
    "quick": GatewayScenario("json, tls and low-rate (gateway_bench.py --quick)", _quick),
    "gateway": GatewayScenario(
        "every gateway row, ttfb, stall, low-rate (gateway_bench.py without peers)", _all
    ),
}

SCRIPTS: dict[str, ScriptScenario] = {
    "validator": ScriptScenario(
        "validate and compile, against jsonschema", "validator_bench.py", _none
    ),
    "validator-peers": ScriptScenario(
        "validator vs jsonschema-rs, fastjsonschema and jsonschema"
        " over the tests' schema corpus, interleaved",
        "validator_peers.py",
        _none,
    ),
    "validate-json": ScriptScenario(
        "what the duplicate-key check adds to validate_json", "validate_json_bench.py", _none
    ),
    "hostile": ScriptScenario(
        "hostile strings against the validator", "hostile_input_bench.py", _none
    ),
    "holdback": ScriptScenario(
        "streaming hold-back: a strict call's first fragment", "stream_bench.py", _none
    ),
    "schema-rss": ScriptScenario(
        "gateway RSS under many distinct large schemas", "schema_cache_rss.py", _none
    ),
    "ledger-insert": ScriptScenario(
        "ledger inserts, random vs time-ordered ids", "ledger_insert_bench.py", _none
    ),
    "instructions": ScriptScenario(
        "instructions per request under callgrind, gateway",
        "instructions.py",
        lambda o: ["--no-limits"],
    ),
    "instructions-baseline": ScriptScenario(
        "instructions per request under callgrind, the pass-through",
        "instructions.py",
        lambda o: ["--target", "baseline"],
    ),
    "threads": ScriptScenario(
        "CPU per request by thread, gateway vs pass-through",
        "thread_cpu.py",
        lambda o: ["--rounds", str(o.rounds), "--duration", f"{o.duration:g}"],
    ),
    "opcodes": ScriptScenario(
        "bytecodes per request by module, in process",
        "profile_gateway.py",
        lambda o: ["--opcodes", "--no-limits", "--duration", f"{o.duration:g}", "--conns", "8"],
    ),
    "profile": ScriptScenario(
        "cProfile of the request path, in process",
        "profile_gateway.py",
        lambda o: ["--duration", f"{o.duration:g}", "--top", "40"],
    ),
    "fair-share": ScriptScenario(
        "a tenant flooding a model vs another tenant's p50 on it, "
        "with and without the model's max_concurrent",
        "tenants_bench.py",
        lambda o: ["fair-share", "--duration", f"{o.duration:g}"],
    ),
    "large-bodies": ScriptScenario(
        "~3 MB bodies of 100k tiny items (and a key getting 429s) vs another client's p99",
        "tenants_bench.py",
        lambda o: ["large-bodies", "--duration", f"{o.duration:g}"],
    ),
    "local-model": ScriptScenario(
        "the local model: valid, corrected, refused",
        "local_model_bench.py",
        lambda o: ["--per-case", "--all"],
    ),
}


def _list() -> str:
    width = max(map(len, [*GATEWAY, *SCRIPTS]))
    lines = ["gateway scenarios (one shared run):"]
    lines += [f"  {name:<{width}}  {s.help}" for name, s in GATEWAY.items()]
    lines.append("component scripts (each run alone, with its defaults):")
    lines += [
        f"  {name:<{width}}  {s.help} (tests/bench/{s.script})" for name, s in SCRIPTS.items()
    ]
    return "\n".join(lines)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as null, so the file is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _git() -> dict[str, Any]:
    def out(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    return {
        "commit": out("rev-parse", "HEAD") or None,
        "dirty": bool(out("status", "--porcelain", "--untracked-files=no")),
    }


def _host() -> dict[str, Any]:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_avg": list(os.getloadavg()),
    }


def _run_script(name: str, scenario: ScriptScenario, o: Options) -> dict[str, Any]:
    cmd = [sys.executable, str(ROOT / "tests/bench" / scenario.script), *scenario.args(o)]
    print(f"{name}: {' '.join(cmd[1:])}", file=sys.stderr)
    started = time.monotonic()
    out = subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    sys.stderr.write(out.stderr)
    print(out.stdout, end="")
    return {
        "command": cmd[1:],
        "exit_code": out.returncode,
        "seconds": time.monotonic() - started,
        "stdout": out.stdout,
        "stderr_tail": out.stderr[-4000:],
    }


def run_scenarios(names: list[str], o: Options, json_path: Path, fail_on_miss: bool) -> int:
    started = datetime.datetime.now(datetime.UTC)
    result: dict[str, Any] = {
        "format": FORMAT,
        "command": ["python", "-m", "tests.bench", *sys.argv[1:]],
        "scenarios": names,
        "started_at": started.isoformat(timespec="seconds"),
        "duration_s": o.duration,
        "host": _host(),
        "git": _git(),
        "gateway": None,
        "components": {},
        "error": None,
    }
    status = 0
    gateway_names = [n for n in names if n in GATEWAY]
    if gateway_names:
        plan = Plan(
            duration=o.duration,
            rows=(),
            ttfb=False,
            stall=False,
            low_rate_requests=0,
            redis_db=o.redis_db,
        )
        for name in gateway_names:
            GATEWAY[name].apply(plan, o)
        if {"peers", "peers-small", "peers-agent"} & set(gateway_names):
            plan.peer_set = Plan().peer_set  # peers-local beside them narrows nothing
        try:
            measured = run(plan)
        except ToolMissing as exc:
            print(exc, file=sys.stderr)
            result["error"] = str(exc)
            status = 2
        except Exception as exc:  # the file still says what ran and how it failed
            result["error"] = f"{type(exc).__name__}: {exc}"
            _write(json_path, result, started)
            raise
        else:
            print(measured.report())
            result["gateway"] = measured.to_json()
            if fail_on_miss and measured.missed:
                status = max(status, 1)
    for name in (n for n in names if n in SCRIPTS):
        part = result["components"][name] = _run_script(name, SCRIPTS[name], o)
        if part["exit_code"] != 0:
            status = max(status, 1 if part["exit_code"] != 2 else 2)
    result["exit_code"] = status
    _write(json_path, result, started)
    print(f"result: {json_path}", file=sys.stderr)
    return status


def _write(path: Path, result: dict[str, Any], started: datetime.datetime) -> None:
    now = datetime.datetime.now(datetime.UTC)
    result["finished_at"] = now.isoformat(timespec="seconds")
    result["seconds"] = (now - started).total_seconds()
    result["host"]["load_avg_end"] = list(os.getloadavg())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(result), indent=1, allow_nan=False) + "\n")


# What each scenario leaves in a result file: the gateway's row, the peer workloads.
_EXPECTED_ROWS = {
    "json": "json",
    "sse": "sse",
    "tls": "json-tls",
    "agent-sized": "agent",
    "sse-text": "sse-text10",
    "miss": "miss",
    "fix": "fix",
}
_EXPECTED_PEERS = {
    "peers": tuple(PEER_WORKLOADS),
    "peers-local": tuple(PEER_WORKLOADS),
    "peers-small": ("small",),
    "peers-agent": ("agent",),
}


def check(path: Path) -> list[str]:
    """What is wrong with a result file (empty: it is complete): strict JSON, the format,
    every gateway row with requests and no errors, each asked-for scenario's figures."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        data = json.loads(path.read_text(), parse_constant=no_constant)
    except (OSError, ValueError) as exc:
        return [f"not readable as JSON: {exc}"]
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return [f"not a {FORMAT} file"]
    problems = []
    if data.get("error"):
        problems.append(f"the run failed: {data['error']}")
    gateway = data.get("gateway")
    if any(n in GATEWAY for n in data.get("scenarios", [])):
        if not isinstance(gateway, dict):
            return [*problems, "no gateway results"]
        for row in gateway.get("rows", []):
            where = f"{row.get('target')} {row.get('scenario')} c{row.get('conns')}"
            if not row.get("requests"):
                problems.append(f"{where}: no request completed")
            if row.get("errors"):
                problems.append(f"{where}: {row['errors']} errors")
            if not isinstance(row.get("cpu_us_per_req"), int | float):
                problems.append(f"{where}: no CPU per request")
        scenarios = data.get("scenarios", [])
        have_rows = {
            r.get("scenario") for r in gateway.get("rows", []) if r.get("target") == "syntic"
        }
        have_peers = {c.get("workload") for c in gateway.get("peers", [])}
        for name in scenarios:
            if name in _EXPECTED_ROWS and _EXPECTED_ROWS[name] not in have_rows:
                problems.append(f"{name}: no syntic {_EXPECTED_ROWS[name]} row")
            for workload in _EXPECTED_PEERS.get(name, ()):
                if workload not in have_peers:
                    problems.append(f"{name}: no peer comparison on the {workload} request")
        if "low-rate" in scenarios and gateway.get("low_rate") is None:
            problems.append("low-rate: no low-rate figures")
        for comparison in gateway.get("peers", []):
            for name, c in comparison.get("contenders", {}).items():
                where = f"peers, {comparison.get('workload')}, {name}"
                if c.get("errors"):
                    problems.append(f"{where}: {c['errors']} errors")
                if not isinstance(c.get("median_cpu_us_per_req"), int | float):
                    problems.append(f"{where}: no CPU per request")
        if (
            not gateway.get("rows")
            and not gateway.get("peers")
            and gateway.get("low_rate") is None
            and not gateway.get("figures")
        ):
            problems.append("the gateway run measured nothing")
    for name, part in (data.get("components") or {}).items():
        if part.get("exit_code") != 0:
            problems.append(f"{name}: exit status {part.get('exit_code')}")
    if data.get("exit_code") not in (0, None) and not problems:
        problems.append(f"exit status {data['exit_code']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the scenarios")
    runner = sub.add_parser("run", help="run scenarios, write one JSON result file")
    runner.add_argument("scenarios", nargs="+", metavar="scenario", choices=[*GATEWAY, *SCRIPTS])
    runner.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="the result file (default: test-artifacts/bench/<UTC>.json)",
    )
    runner.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    runner.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="peers: alternating rounds; litellm: ratio pairs; threads",
    )
    runner.add_argument(
        "--light-baseline",
        action="store_true",
        help="peers: also the pass-through without a durable record",
    )
    runner.add_argument("--low-rate-requests", type=int, default=10)
    runner.add_argument("--low-rate-interval", type=float, default=3.0)
    runner.add_argument("--redis-db", type=int, default=0)
    runner.add_argument(
        "--fail-on-miss", action="store_true", help="exit 1 if a measured target was missed"
    )
    checker = sub.add_parser("check", help="is a result file complete and valid")
    checker.add_argument("path", type=Path)
    ns = parser.parse_args(argv)
    if ns.command == "list":
        print(_list())
        return 0
    if ns.command == "check":
        problems = check(ns.path)
        print("\n".join(problems) if problems else f"{ns.path}: ok")
        return 1 if problems else 0
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = ns.json or ROOT / "test-artifacts" / "bench" / f"{stamp}.json"
    options = Options(
        ns.duration,
        ns.rounds,
        ns.low_rate_requests,
        ns.low_rate_interval,
        ns.light_baseline,
        ns.redis_db,
    )
    return run_scenarios(list(dict.fromkeys(ns.scenarios)), options, path, ns.fail_on_miss)


if __name__ == "__main__":
    sys.exit(main())
