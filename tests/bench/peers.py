"""The gateway's peers in ``gateway_bench.py``: each started against the same mock upstream,
installed on first use under ``~/.cache/syntic-bench`` at a pinned version.

- ``baseline_passthrough``: ``tests/bench/baseline_passthrough.py`` (Starlette + aiohttp +
  the validator + a durable per-request record, nothing else), the floor a strict
  pass-through that keeps a record costs in Python; ``durable=False``: without the record;
- ``portkey_gateway``: Portkey's AI gateway (npm ``@portkey-ai/gateway``, Node), routed per
  request by its ``x-portkey-provider`` and ``x-portkey-custom-host`` headers;
- ``litellm_proxy``: LiteLLM's proxy (PyPI ``litellm[proxy]``, its own venv), auth on.

Each yields a ``Peer`` (its process, URL, the headers and model a client sends it) or None
when it cannot be installed or started, with the reason on stderr. ``peer_rounds`` runs
them against the gateway in alternating rounds, on one or more requests (``Workload``),
and returns a ``Comparison`` of their CPU per request for each.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.bench.loadgen import measure, steal_counters, steal_share, wrk_script
from tests.support.gateway_proc import free_port

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "syntic-bench"

# Peer versions, pinned so runs on different days compare the same code. LiteLLM: the newest
# whose ``proxy`` extra installs from PyPI alone (later ones need a ``litellm-proxy`` wheel).
PORTKEY_VERSION = "1.15.2"
LITELLM_VERSION = "1.108.7"
PATH = "/v1/chat/completions"


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    pid: int
    url: str  # base URL; clients post to url + "/v1/chat/completions"
    headers: dict[str, str]
    model: str  # the model name this peer routes to the mock's ``mock-good``
    agent_model: str  # ... and to ``mock-agent`` (the agent-sized request's answer)


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(httpx.HTTPError, OSError):
            if ready():
                return True
        time.sleep(0.2)
    return False


def _listening(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@contextlib.contextmanager
def baseline_passthrough(mock_url: str, *, durable: bool = True) -> Iterator[Peer | None]:
    """The pass-through with its durable record (spool + batched SQLite rows) in a fresh
    directory, or without one (``durable=False``: ``--light``)."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="baseline-bench-"))
    log_path = workdir / "baseline.log"
    mode = ["--record-dir", str(workdir / "record")] if durable else ["--light"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests/bench/baseline_passthrough.py"),
                "--port",
                str(port),
                "--upstream",
                mock_url + "/v1",
                *mode,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        if _wait(lambda: _listening(port), proc, time.monotonic() + 30):
            yield Peer(
                "baseline" if durable else "baseline-light",
                proc.pid,
                f"http://127.0.0.1:{port}",
                {"Content-Type": "application/json"},
                "mock-good",
                "mock-agent",
            )
        else:
            print(f"baseline pass-through did not start; see {log_path}", file=sys.stderr)
            yield None
    finally:
        _stop(proc)


def _installed_npm_version(package_json: Path) -> str | None:
    try:
        version = json.loads(package_json.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return version if isinstance(version, str) else None


@contextlib.contextmanager
def portkey_gateway(mock_url: str, budget_s: float) -> Iterator[Peer | None]:
    """Portkey's gateway on Node (``start-server.js --port=N --headless``: no console UI),
    sending each request to ``x-portkey-custom-host`` + ``/chat/completions`` with the
    OpenAI provider's transforms, the client's ``Authorization`` passed on."""
    home = CACHE / "portkey"
    package = home / "node_modules/@portkey-ai/gateway"
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        print(
            "Portkey skipped: node and npm are needed (Debian: apt-get install -y nodejs npm)",
            file=sys.stderr,
        )
        yield None
        return
    deadline = time.monotonic() + budget_s
    if _installed_npm_version(package / "package.json") != PORTKEY_VERSION:
        print(f"installing @portkey-ai/gateway@{PORTKEY_VERSION} into {home}...", file=sys.stderr)
        home.mkdir(parents=True, exist_ok=True)
        if not (home / "package.json").exists():
            (home / "package.json").write_text('{"private": true}\n')
        try:
            # Its only install script runs patch-package, which has no patches in the
            # published package.
            subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--ignore-scripts",
                    "--save-exact",
                    f"@portkey-ai/gateway@{PORTKEY_VERSION}",
                ],
                cwd=home,
                check=True,
                timeout=max(10.0, deadline - time.monotonic()),
            )
        except (subprocess.SubprocessError, OSError) as exc:
            print(f"Portkey unavailable, skipped: {exc!r}", file=sys.stderr)
            yield None
            return
    port = free_port()
    log_path = home / "gateway.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [node, str(package / "build/start-server.js"), f"--port={port}", "--headless"],
            cwd=home,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NODE_ENV": "production"},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        if _wait(
            lambda: httpx.get(url + "/", timeout=1).status_code == 200,
            proc,
            max(deadline, time.monotonic() + 60),
        ):
            yield Peer(
                "portkey",
                proc.pid,
                url,
                {
                    "Content-Type": "application/json",
                    "Authorization": "Bearer sk-mock",
                    "x-portkey-provider": "openai",
                    "x-portkey-custom-host": mock_url + "/v1",
                },
                "mock-good",
                "mock-agent",
            )
        else:
            print(f"Portkey did not start; see {log_path}", file=sys.stderr)
            yield None
    finally:
        _stop(proc)


@contextlib.contextmanager
def litellm_proxy(mock_url: str, budget_s: float) -> Iterator[Peer | None]:
    """LiteLLM's proxy in its own venv (installed on first use), one worker, auth on."""
    venv = CACHE / "litellm-venv"
    exe = venv / "bin" / "litellm"
    stamp = venv / ".syntic-bench-version"
    deadline = time.monotonic() + budget_s
    try:
        installed = stamp.read_text().strip() if stamp.exists() else None
        if not exe.exists() or installed != LITELLM_VERSION:
            print(
                f"installing litellm[proxy]=={LITELLM_VERSION} into {venv} (budget "
                f"{budget_s:.0f}s)...",
                file=sys.stderr,
            )
            CACHE.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
            subprocess.run(
                [str(venv / "bin/pip"), "install", "-q", f"litellm[proxy]=={LITELLM_VERSION}"],
                check=True,
                timeout=max(10.0, deadline - time.monotonic()),
            )
            stamp.write_text(LITELLM_VERSION + "\n")
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"LiteLLM unavailable, skipped: {exc!r}", file=sys.stderr)
        yield None
        return
    workdir = Path(tempfile.mkdtemp(prefix="litellm-bench-"))
    master = "sk-bench-" + secrets.token_hex(16)  # auth on, as for the gateway
    config = workdir / "config.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: bench\n"
        "    litellm_params:\n"
        "      model: openai/mock-good\n"
        f"      api_base: {mock_url}/v1\n"
        "      api_key: sk-mock\n"
        "  - model_name: bench-agent\n"
        "    litellm_params:\n"
        "      model: openai/mock-agent\n"
        f"      api_base: {mock_url}/v1\n"
        "      api_key: sk-mock\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "general_settings:\n"
        f"  master_key: {master}\n"
    )
    port = free_port()
    env = {**os.environ, "LITELLM_TELEMETRY": "False", "LITELLM_LOG": "ERROR"}
    url = f"http://127.0.0.1:{port}"
    with (workdir / "litellm.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                str(exe),
                "--config",
                str(config),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--num_workers",
                "1",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    try:
        ready = _wait(
            lambda: httpx.get(url + "/health/liveliness", timeout=1).status_code == 200,
            proc,
            max(deadline, time.monotonic()) + 120,
        )
        if ready:
            yield Peer(
                "litellm",
                proc.pid,
                url,
                {"Content-Type": "application/json", "Authorization": f"Bearer {master}"},
                "bench",
                "bench-agent",
            )
        else:
            print(f"LiteLLM did not start; see {workdir / 'litellm.log'}", file=sys.stderr)
            yield None
    finally:
        _stop(proc)


@dataclass(frozen=True, slots=True)
class Workload:
    """One request the peers are compared on: its name and the body each peer is sent."""

    name: str  # "small", "agent"
    title: str
    body: Callable[[Peer], str]


# (figure key, numerator, denominator) of the CPU-per-request ratios of the medians
RATIOS = (
    ("vs_baseline", "syntic", "baseline"),
    ("vs_baseline_light", "syntic", "baseline-light"),
    ("vs_portkey", "portkey", "syntic"),
    ("vs_litellm", "litellm", "syntic"),
    # The pass-through's own, reported beside syntic's: bounds on what any gateway that
    # costs at least the pass-through can reach (docs/decisions/0031).
    ("baseline_vs_portkey", "portkey", "baseline"),
    ("baseline_vs_litellm", "litellm", "baseline"),
)
VERSIONS = {
    "portkey": f"@portkey-ai/gateway {PORTKEY_VERSION}",
    "litellm": f"litellm {LITELLM_VERSION}",
}


@dataclass(slots=True)
class Comparison:
    """What the alternating rounds measured for one workload, per contender and round."""

    workload: Workload
    duration: float
    contenders: list[str]
    cpu_us: dict[str, list[float]]
    rps: dict[str, list[float]]
    errors: dict[str, int]
    steal: list[float]  # the host's stolen share (%) during each round of this workload

    def median(self, name: str) -> float:
        """The median CPU per request; NaN if a round completed no request."""
        values = self.cpu_us[name]
        return float("nan") if any(math.isnan(v) for v in values) else statistics.median(values)

    def ratios(self) -> dict[str, tuple[float, list[float]]]:
        """Each ratio of ``RATIOS`` whose two sides ran and completed requests in every
        round: (of the medians, per round)."""
        out: dict[str, tuple[float, list[float]]] = {}
        for key, over, under in RATIOS:
            if (
                self.cpu_us.get(over)
                and self.cpu_us.get(under)
                and not math.isnan(self.median(over) + self.median(under))
            ):
                out[key] = (
                    self.median(over) / self.median(under),
                    [a / b for a, b in zip(self.cpu_us[over], self.cpu_us[under], strict=True)],
                )
        return out

    def figures(self) -> dict[str, float]:
        """The ratios of the medians, keyed ``<workload>:<ratio>`` (``PEER_TARGETS``)."""
        return {f"{self.workload.name}:{k}": v for k, (v, _) in self.ratios().items()}

    def report(self) -> str:
        rounds = len(self.steal)
        lines = [
            f"\npeers, {self.workload.title}, c32, {rounds} alternating rounds of "
            f"{self.duration:g} s (server CPU per request, all the peer's processes; "
            "median req/s; host steal per round "
            + ", ".join(f"{x:.1f}%" for x in self.steal)
            + "):"
        ]
        for name in self.contenders:
            if not self.cpu_us[name]:
                continue
            each = ", ".join(f"{c:,.0f}" for c in self.cpu_us[name])
            lines.append(
                f"  {name}: {each} us/req, median {self.median(name):,.0f} us/req, "
                f"{statistics.median(self.rps[name]):,.0f} req/s"
                + (f", {self.errors[name]} errors" if self.errors[name] else "")
            )
        for key, (value, per_round) in self.ratios().items():
            over, under = next((o, u) for k, o, u in RATIOS if k == key)
            lines.append(
                f"  {over} / {under}: ratio of medians {value:.2f}x (per round: "
                + ", ".join(f"{r:.2f}" for r in per_round)
                + ")"
            )
        shown = [VERSIONS[n] for n in self.contenders if n in VERSIONS]
        if shown:
            lines.append("  versions: " + ", ".join(shown))
        if any(self.errors.values()):
            lines.append("  (a contender with errors is not comparable: see its log)")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "workload": self.workload.name,
            "title": self.workload.title,
            "duration_s": self.duration,
            "rounds": len(self.steal),
            "steal_pct": self.steal,
            "contenders": {
                n: {
                    "cpu_us_per_req": self.cpu_us[n],
                    "median_cpu_us_per_req": self.median(n),
                    "rps": self.rps[n],
                    "median_rps": statistics.median(self.rps[n]),
                    "errors": self.errors[n],
                    **({"version": VERSIONS[n]} if n in VERSIONS else {}),
                }
                for n in self.contenders
                if self.cpu_us[n]
            },
            "ratios": {k: {"of_medians": v, "per_round": r} for k, (v, r) in self.ratios().items()},
        }


def peer_rounds(
    contenders: list[Peer],
    workloads: list[Workload],
    duration: float,
    rounds: int,
    *,
    cpu: int | None,
) -> list[Comparison]:
    """32-connection runs of every contender on every workload (wrk pinned to ``cpu``),
    ``rounds`` times; in each round the workloads follow each other and each starts one
    contender later in the list than the round before (the host drifts between runs; every
    contender sees every slot). One ``Comparison`` per workload."""
    scripts = {
        (w.name, p.name): wrk_script(p.headers, w.body(p)) for w in workloads for p in contenders
    }
    for w in workloads:  # warm-up: JIT, caches, upstream pools
        for p in contenders:
            measure(
                p.pid, p.url + PATH, scripts[w.name, p.name], connections=32, duration_s=1, cpu=cpu
            )
    names = [p.name for p in contenders]
    out = [
        Comparison(
            w,
            duration,
            names,
            {n: [] for n in names},
            {n: [] for n in names},
            dict.fromkeys(names, 0),
            [],
        )
        for w in workloads
    ]
    for i in range(rounds):
        shift = i % len(contenders)
        for comparison in out:
            w = comparison.workload
            steal_before = steal_counters()
            parts = []
            for p in contenders[shift:] + contenders[:shift]:
                m = measure(
                    p.pid,
                    p.url + PATH,
                    scripts[w.name, p.name],
                    connections=32,
                    duration_s=duration,
                    cpu=cpu,
                )
                comparison.cpu_us[p.name].append(m.cpu_us_per_req)
                comparison.rps[p.name].append(m.wrk.rps)
                # A run that completed no request (NaN per request) is an error too.
                comparison.errors[p.name] += m.wrk.errors + (m.wrk.requests == 0)
                parts.append(
                    f"{p.name} {m.wrk.rps:.0f} req/s {m.cpu_us_per_req:.0f} us/req"
                    + (f" ({m.wrk.errors} errors)" if m.wrk.errors else "")
                )
            comparison.steal.append(steal_share(steal_before))
            print(
                f"  peer round {i + 1}, {w.name}: "
                + ", ".join(parts)
                + f"; host steal {comparison.steal[-1]:.1f}%",
                file=sys.stderr,
            )
    return out
