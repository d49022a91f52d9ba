"""User and system CPU per request, thread by thread, of ``syntic serve`` and the reference
pass-through, in alternating rounds. A script, not collected::

    .venv/bin/python tests/bench/thread_cpu.py [--rounds 2] [--duration 8] [--conns 32]

``gateway_bench.py --compare-peers`` gives one figure per server (user + system, every
thread); this splits it, so a change can be placed: Python on the event loop (user time
of the loop thread), system calls (its system time), or a helper thread (the SQLite
writer, a client's runtime). Each server is pinned to core 0 with all its threads, ``wrk``
runs on core 1, as in ``gateway_bench.py``; the gateway has its production setup (a key
with rpm/tpm limits checked in Redis, the SQLite ledger, JSON request logs). Needs wrk and
Redis on 127.0.0.1:6379.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.gateway_bench import Mock, _headers, _models, body  # noqa: E402
from tests.bench.loadgen import pin, run_wrk, thread_times, wrk_script  # noqa: E402
from tests.bench.peers import baseline_passthrough  # noqa: E402
from tests.support.gateway_proc import start_gateway  # noqa: E402


def measure(pid: int, url: str, script: str, duration: float, conns: int) -> list[str]:
    """One warm-up run, then one measured run: a line per thread that used CPU."""
    pin(pid, 0)
    run_wrk(url, script, connections=conns, duration_s=2, cpu=1)
    before = thread_times(pid)
    result = run_wrk(url, script, connections=conns, duration_s=duration, cpu=1)
    after = thread_times(pid)
    per = 1e6 / max(result.requests, 1)
    lines: list[tuple[float, str]] = []
    total_user = total_sys = 0.0
    for tid, (user, system) in after.items():
        user0, sys0 = before.get(tid, (0.0, 0.0))
        du, ds = (user - user0) * per, (system - sys0) * per
        total_user += du
        total_sys += ds
        if du + ds > 0:
            role = "main" if tid == pid else "thread"
            lines.append((du + ds, f"    {role:6} {tid:>8}: user {du:6.1f}  sys {ds:5.1f} us/req"))
    head = (
        f"  {result.requests} requests: user {total_user:6.1f}  sys {total_sys:5.1f}  "
        f"total {total_user + total_sys:6.1f} us/req"
    )
    return [head, *(text for _, text in sorted(lines, reverse=True))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--conns", type=int, default=32)
    ns = parser.parse_args()
    mock = Mock()
    gw = None
    try:
        workdir = Path(tempfile.mkdtemp(prefix="syntic-threads-"))
        gw = start_gateway(
            workdir / "gw", _models(mock.url), env={"SYNTIC_REDIS_URL": "redis://127.0.0.1:6379/0"}
        )
        key = gw.create_key("threads", "--rpm", "1000000000", "--tpm", "2000000000")
        syntic_pid, syntic_url = gw.proc.pid, gw.base_url + "/v1/chat/completions"
        syntic_script = wrk_script(_headers(key), body("bench"))
        with baseline_passthrough(mock.url) as peer:
            if peer is None:
                return 2
            base_script = wrk_script(peer.headers, body(peer.model))
            runs: list[tuple[str, Callable[[], list[str]]]] = [
                (
                    "syntic",
                    lambda: measure(syntic_pid, syntic_url, syntic_script, ns.duration, ns.conns),
                ),
                (
                    "baseline",
                    lambda: measure(
                        peer.pid,
                        peer.url + "/v1/chat/completions",
                        base_script,
                        ns.duration,
                        ns.conns,
                    ),
                ),
            ]
            for n in range(ns.rounds):
                for name, run in runs if n % 2 == 0 else runs[::-1]:
                    print(f"round {n + 1}, {name}:")
                    print("\n".join(run()), flush=True)
    finally:
        if gw is not None:
            gw.stop(timeout=30)
        mock.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
