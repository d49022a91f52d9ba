"""Instructions per request of ``syntic serve``: a figure the host's noise can't
move. A script, not collected::

    .venv/bin/python tests/bench/instructions.py [--requests 2000] [--conns 8] [--sdk-headers]
        [--scenario json|sse|fix|agent ...] [--no-limits] [--target syntic|baseline]

CPU time per request on a shared 2-core VM moves by 10-30% between identical runs, which
hides any change smaller than that. This runs the same production gateway as
``gateway_bench.py`` (real key with rpm/tpm limits and Redis, strict tool linted and
validated, SQLite ledger, JSON request log, metrics) under ``valgrind --tool=callgrind``
with instrumentation off until it serves (``callgrind_control -i on``); per scenario, warms
it up, zeroes the counters, sends exactly ``--requests`` requests from an asyncio client
in this process and dumps the counts; and prints the gateway process's instructions (all
its threads, user space) per request, and the rate-limit trips to Redis it made.

With ``--no-limits`` (a key without rpm/tpm) repeated runs of the same code agree to
within a fraction of a percent, whatever else the machine is doing (CPU time moves by
tens of percent): use it to compare two versions of any other code. With limits, the count
also moves with the number of Redis trips (each costly; reservations grow while a key's
requests come back quickly, which valgrind's slowness disturbs), far more of them here
than at full speed (figures in ``docs/performance.md``). System calls (kernel time) are not
counted: the two writes and two reads per request are the same before and after a change
to Python code. Needs valgrind
(Debian: ``apt-get install -y valgrind``) and Redis on 127.0.0.1:6379. ~2-4 minutes.

``--target baseline`` counts the same way the reference pass-through of the CPU target
(``tests/bench/baseline_passthrough.py``, unchanged, with its durable record; json and
agent only: it does not stream), so
the gateway-to-baseline ratio can be read in instructions instead of noisy CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.agent_request import agent_body  # noqa: E402
from tests.bench.gateway_bench import Mock, _headers, _models, body  # noqa: E402
from tests.support.gateway_proc import free_port, start_gateway  # noqa: E402

# scenario -> the body, given whether the target is the baseline (it routes nothing, so it
# gets the upstream's own model names)
BODIES: dict[str, Callable[[bool], str]] = {
    "json": lambda baseline: body("mock-good" if baseline else "bench"),
    "sse": lambda baseline: body("mock-good" if baseline else "bench", stream=True),
    "fix": lambda _baseline: body("bench-fix"),
    "agent": lambda baseline: agent_body("mock-agent" if baseline else "bench-agent"),
}


# What the official ``openai`` Python SDK adds to each request (its ``x-stainless-*``
# telemetry and its user agent): with httpx's own, 17 request headers instead of 8.
SDK_HEADERS = {
    "user-agent": "AsyncOpenAI/Python 1.109.1",
    "x-stainless-lang": "python",
    "x-stainless-package-version": "1.109.1",
    "x-stainless-os": "Linux",
    "x-stainless-arch": "x64",
    "x-stainless-runtime": "CPython",
    "x-stainless-runtime-version": "3.11.7",
    "x-stainless-async": "async:asyncio",
    "x-stainless-retry-count": "0",
    "x-stainless-read-timeout": "600",
}


async def _send(
    url: str, key: str, payload: str, n: int, conns: int, extra: dict[str, str] | None = None
) -> None:
    """Exactly ``n`` requests, ``conns`` at a time; every one must succeed."""
    left = n
    limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)
    headers = {**_headers(key), **(extra or {})}
    async with httpx.AsyncClient(limits=limits, timeout=120, headers=headers) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                r = await client.post(url, content=payload)
                if r.status_code != 200:
                    raise RuntimeError(f"HTTP {r.status_code}: {r.text[:500]}")

        await asyncio.gather(*(worker() for _ in range(conns)))


def _prime(url: str, key: str, payload: str, timeout_s: float = 300) -> None:
    """One request until it succeeds: under valgrind the first ones can outlast the
    gateway's own deadlines (the key store lookup's), which the warm-up must not fail on."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = httpx.post(url, content=payload, headers=_headers(key), timeout=120)
        if r.status_code == 200 or time.monotonic() > deadline:
            return
        time.sleep(1)


def _trips(base_url: str) -> float:
    """``syntic_ratelimit_redis_trips_total`` from the gateway's /metrics."""
    text = httpx.get(base_url + "/metrics", timeout=60).text
    for line in text.splitlines():
        if line.startswith("syntic_ratelimit_redis_trips_total "):
            return float(line.split()[1])
    return 0.0


def _control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=120)


def _total(out_dir: Path, before: set[Path]) -> int:
    """The instruction total of the newest dump."""
    dumps = sorted(set(out_dir.glob("callgrind.out*")) - before, key=lambda p: p.stat().st_mtime)
    if not dumps:
        raise RuntimeError(f"no callgrind dump in {out_dir}")
    for line in dumps[-1].read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {dumps[-1]}")


def _start_baseline(
    wrap: tuple[str, ...], upstream: str, log: Path, timeout_s: float = 300
) -> tuple[subprocess.Popen[bytes], str]:
    """``baseline_passthrough.py`` under ``wrap``, once it accepts connections."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *wrap,
                sys.executable,
                str(ROOT / "tests/bench/baseline_passthrough.py"),
                "--port",
                str(port),
                "--upstream",
                upstream,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the baseline exited; see {log}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
            return proc, f"http://127.0.0.1:{port}"
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"the baseline did not start; see {log}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description="instructions per request under callgrind")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--conns", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--scenario", action="append", choices=sorted(BODIES))
    parser.add_argument("--redis-db", type=int, default=0)
    parser.add_argument(
        "--sdk-headers",
        action="store_true",
        help="send the headers the openai SDK sends (17 instead of 8)",
    )
    parser.add_argument(
        "--no-limits",
        action="store_true",
        help="a key without rpm/tpm: no rate-limit check, and no run-to-run "
        "variance from reservation refills (for A/B of other code)",
    )
    parser.add_argument(
        "--target",
        choices=("syntic", "baseline"),
        default="syntic",
        help="baseline: tests/bench/baseline_passthrough.py (json and agent only)",
    )
    ns = parser.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            print(f"{tool} not found: apt-get install -y valgrind", file=sys.stderr)
            return 2
    scenarios = ns.scenario or ["json", "sse"]
    if ns.target == "baseline":
        if not set(scenarios) <= {"json", "agent"} and ns.scenario:
            parser.error("the baseline only answers the json and agent scenarios")
        scenarios = ns.scenario or ["json"]
    extra = SDK_HEADERS if ns.sdk_headers else None
    workdir = Path(tempfile.mkdtemp(prefix="syntic-instr-"))
    out_dir = workdir / "callgrind"
    out_dir.mkdir()
    mock = Mock()
    gw = None
    baseline: subprocess.Popen[bytes] | None = None
    wrap = (
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_dir}/callgrind.out",
    )
    try:
        print(f"starting {ns.target} under callgrind (~30 s)...", file=sys.stderr)
        if ns.target == "baseline":
            baseline, base_url = _start_baseline(wrap, mock.url + "/v1", workdir / "baseline.log")
            key, pid = "sk-mock", str(baseline.pid)
        else:
            gw = start_gateway(
                workdir / "gw",
                _models(mock.url),
                env={"SYNTIC_REDIS_URL": f"redis://127.0.0.1:6379/{ns.redis_db}"},
                wrap=wrap,
                ready_timeout=300,
            )
            limits = () if ns.no_limits else ("--rpm", "1000000000", "--tpm", "2000000000")
            key = gw.create_key("instr", *limits)
            base_url, pid = gw.base_url, str(gw.proc.pid)
        url = base_url + "/v1/chat/completions"
        results = []
        _control("-i", "on", pid)  # started off: startup and imports are not instrumented
        for scenario in scenarios:
            payload = BODIES[scenario](baseline is not None)
            _prime(url, key, payload)
            asyncio.run(_send(url, key, payload, ns.warmup, ns.conns, extra))
            before = set(out_dir.glob("callgrind.out*"))
            trips = _trips(base_url) if gw is not None else 0.0
            _control("-z", pid)  # zero the counters: only the next requests count
            asyncio.run(_send(url, key, payload, ns.requests, ns.conns, extra))
            _control("-d", pid)
            total = _total(out_dir, before)
            trips = _trips(base_url) - trips if gw is not None else 0.0
            results.append((scenario, total / ns.requests, trips))
            print(
                f"  {scenario}: {total:,} instructions / {ns.requests} requests, "
                f"{trips:.0f} Redis trips",
                file=sys.stderr,
            )
        what = "syntic serve" if gw is not None else "baseline_passthrough.py"
        print(
            f"instructions per request ({what} under callgrind, {ns.conns} "
            f"connections, {ns.requests} requests each, after {ns.warmup} warm-up):"
        )
        for scenario, per, trips in results:
            print(
                f"  {scenario:5} {per / 1000:8.0f} k   ({trips:.0f} rate-limit trips to Redis: "
                "reservations refill by timing, which valgrind's slowness moves)"
            )
    finally:
        if gw is not None:
            gw.stop(timeout=120)
        if baseline is not None:
            _stop(baseline)
        mock.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
