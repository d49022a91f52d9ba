"""Profile the gateway's request path under load. A script, not collected::

    .venv/bin/python tests/bench/profile_gateway.py [--duration 8] [--conns 32]
        [--model bench|bench-fix] [--stream] [--agent] [--top 40] [--no-profile] [--log FILE]
        [--dump FILE] [--opcodes] [--target syntic|baseline]

The app runs in this process (uvicorn, uvloop + httptools, the production app from
``create_app`` with Redis limits, a real key and the SQLite ledger) under ``cProfile`` with a
CPU-time clock (``time.thread_time``: the event loop thread only, so time spent waiting
for a core on a busy machine is not charged), while ``wrk`` drives it from core 1 against
the mock upstream. Prints the top functions by own time and by cumulative time, and
the CPU per request measured without the profiler's overhead when ``--no-profile``.
``--opcodes`` counts the bytecodes executed instead, by module and by function;
``--target baseline`` runs the reference pass-through of the CPU target
(``baseline_passthrough.py`` with its durable record, on uvicorn's own protocol) the same
way, to compare the two.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402

from gateway.app import create_app  # noqa: E402
from gateway.observability.logs import configure_logging  # noqa: E402
from gateway.server.process import freeze_startup_heap  # noqa: E402
from gateway.server.protocol import serve_options  # noqa: E402
from gateway.settings import load_settings  # noqa: E402
from tests.bench.agent_request import agent_body  # noqa: E402
from tests.bench.baseline_passthrough import create_app as baseline_app  # noqa: E402
from tests.bench.gateway_bench import Mock, _headers, _models, body  # noqa: E402
from tests.bench.loadgen import WrkResult, run_wrk, thread_times, wrk_script  # noqa: E402
from tests.support.gateway_proc import toml_config  # noqa: E402


def _syntic(config: Path, env: dict[str, str], *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "gateway", *args, "--config", str(config)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1].strip()


def _thread_cpu(tid: int) -> tuple[float, float]:
    """The thread's user and system CPU seconds so far."""
    return thread_times(os.getpid())[tid]


def _opcode_counter(counts: collections.Counter[types.CodeType]) -> Any:
    """A ``sys.settrace`` function counting every bytecode executed, by code object."""

    def local(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            counts[frame.f_code] += 1
        return local

    def tracer(frame: types.FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return local

    return tracer


def _module_group(filename: str) -> str:
    """A bytecode's owner: the gateway's subpackage, or the library's top package."""
    where = filename.replace(str(ROOT) + "/", "")
    if "site-packages/" in where:
        return where.split("site-packages/")[-1].split("/")[0].removesuffix(".py")
    if where.startswith(("gateway/", "tests/")):
        parts = where.split("/")
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    if where.startswith("<"):
        return where  # generated code: dataclass methods, the validator's compiled checks
    return "stdlib" if "/lib/python" in where else where.split("/")[0]


def _print_opcodes(counts: collections.Counter[types.CodeType], requests: int, top: int) -> None:
    per = max(requests, 1)
    total = sum(counts.values())
    print(
        f"bytecodes on the event loop thread: {total / per:,.0f} per request "
        f"({requests} requests, warm-up included)"
    )
    groups: collections.Counter[str] = collections.Counter()
    for code, n in counts.items():
        groups[_module_group(code.co_filename)] += n
    print("by module:")
    for group, n in groups.most_common():
        print(f"  {n / per:8.1f}  {group}")
    print("by function:")
    for code, n in counts.most_common(top):
        where = code.co_filename.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
        print(f"  {n / per:8.1f}  {where}:{code.co_firstlineno}({code.co_name})")


def main() -> int:
    parser = argparse.ArgumentParser(description="profile the gateway under wrk load")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--model", default="bench")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument(
        "--agent",
        action="store_true",
        help="the agent-sized request (tests/bench/agent_request.py) instead "
        "of the small one (--model is then bench-agent)",
    )
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument(
        "--opcodes",
        action="store_true",
        help="count Python bytecodes executed per request by function on "
        "the event loop thread instead of profiling (deterministic; "
        "slow: use --duration 3 --conns 8)",
    )
    parser.add_argument(
        "--dump",
        metavar="FILE",
        default="",
        help="also save the raw cProfile stats (pstats) to FILE",
    )
    parser.add_argument("--redis-db", type=int, default=0)
    parser.add_argument(
        "--target",
        choices=("syntic", "baseline"),
        default="syntic",
        help="baseline: the reference pass-through of the CPU target",
    )
    parser.add_argument(
        "--no-limits",
        action="store_true",
        help="a key without rpm/tpm: no rate-limit check (ablation)",
    )
    parser.add_argument(
        "--log",
        metavar="FILE",
        default="",
        help="log as syntic serve does (info, one JSON line per request) into FILE",
    )
    parser.add_argument(
        "--gc-threshold",
        type=int,
        default=0,
        help="gc.set_threshold(N) for the young generation (0: as syntic serve)",
    )
    ns = parser.parse_args()
    mock = Mock()
    try:
        workdir = Path(tempfile.mkdtemp(prefix="syntic-prof-"))
        config = workdir / "gateway.toml"
        config.write_text(toml_config(_models(mock.url)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
        env["SYNTIC_DATABASE_URL"] = f"sqlite:///{workdir / 'syntic.db'}"
        env["SYNTIC_REDIS_URL"] = f"redis://127.0.0.1:6379/{ns.redis_db}"
        env["PYTHONPATH"] = str(ROOT)
        _syntic(config, env, "migrate")
        limits = () if ns.no_limits else ("--rpm", "1000000000", "--tpm", "2000000000")
        key = _syntic(config, env, "keys", "create", "--name", "prof", *limits)
        settings = load_settings(config, env)
        app: Any = (
            baseline_app(mock.url, workdir / "baseline-record")
            if ns.target == "baseline"
            else create_app(settings)
        )
        # As ``syntic serve`` runs it (gateway.commands.serve).
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=0,
                loop="uvloop",
                log_level="warning",
                access_log=False,
                lifespan="on",
                server_header=False,
                proxy_headers=False,
                **({} if ns.target == "baseline" else serve_options(settings)),
            )
        )
        result: list[WrkResult] = []
        cpu: list[float] = []
        main_tid = threading.get_native_id()

        def drive() -> None:
            while not server.started:
                time.sleep(0.05)
            port = server.servers[0].sockets[0].getsockname()[1]
            if ns.agent:  # the baseline routes nothing: the upstream's own name
                payload = agent_body("mock-agent" if ns.target == "baseline" else "bench-agent")
            else:
                model = "mock-good" if ns.target == "baseline" else ns.model
                payload = body(model, stream=ns.stream)
            script = wrk_script(_headers(key), payload)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            run_wrk(url, script, connections=ns.conns, duration_s=1, cpu=1)  # warm up
            before, loop_before = time.process_time(), _thread_cpu(main_tid)
            result.append(run_wrk(url, script, connections=ns.conns, duration_s=ns.duration, cpu=1))
            cpu.append(time.process_time() - before)
            loop_after = _thread_cpu(main_tid)
            cpu.append(loop_after[0] - loop_before[0])  # user
            cpu.append(loop_after[1] - loop_before[1])  # system (syscalls: sockets, epoll)
            server.should_exit = True

        if ns.log:
            configure_logging("info", "json", stream=open(ns.log, "a"))  # noqa: SIM115
        freeze_startup_heap()  # as ``syntic serve`` does (also the young-generation threshold)
        if ns.gc_threshold:
            gc.set_threshold(ns.gc_threshold)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})
        threading.Thread(target=drive, daemon=True).start()
        prof = None if ns.no_profile or ns.opcodes else cProfile.Profile(time.thread_time)
        if prof is not None:
            prof.enable()
        opcodes: collections.Counter[types.CodeType] = collections.Counter()
        if ns.opcodes:
            sys.settrace(_opcode_counter(opcodes))
        server.run()
        sys.settrace(None)
        if prof is not None:
            prof.disable()
        w = result[0]
        print(
            f"{w.requests} requests, {w.rps:.0f} req/s, p50 {w.p50_us / 1000:.2f} ms, "
            f"errors {w.errors}, process CPU {cpu[0] * 1e6 / max(w.requests, 1):.0f} us/req"
            f" (event loop thread {(cpu[1] + cpu[2]) * 1e6 / max(w.requests, 1):.0f}:"
            f" user {cpu[1] * 1e6 / max(w.requests, 1):.0f},"
            f" system {cpu[2] * 1e6 / max(w.requests, 1):.0f})"
            + (" (profiled)" if prof is not None else "")
        )
        if ns.opcodes:
            _print_opcodes(opcodes, server.server_state.total_requests, ns.top)
        limiter = getattr(getattr(app.state, "services", None), "limiter", None)
        if limiter is not None and hasattr(limiter, "trip_count"):
            print(
                f"rate limits: {limiter.trip_count} Redis check trips, "
                f"{limiter.leased_count} requests admitted from reservations"
            )
        if prof is not None:
            if ns.dump:
                prof.dump_stats(ns.dump)
            stats = pstats.Stats(prof)
            stats.sort_stats("tottime").print_stats(ns.top)
            stats.sort_stats("cumulative").print_stats(ns.top)
    finally:
        mock.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
