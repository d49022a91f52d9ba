"""Load generation and process accounting for the gateway benchmark.

``run_wrk`` drives one target with ``wrk`` (Debian package ``wrk``) for a bounded time,
pinned to a CPU, with a generated Lua script (POST body, headers, optional per-request
body variation) whose ``done`` hook prints the figures as one parseable line.
``cpu_seconds`` and ``rss_mb`` read utime+stime and RSS of a process tree from ``/proc``,
``thread_times`` one process's threads. The host:
``steal_counters``/``steal_share`` (CPU time the hypervisor took) and ``calibrate`` (a
fixed pure-Python loop, to compare machines).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True, slots=True)
class WrkResult:
    """What one wrk run measured (latencies in microseconds)."""

    requests: int
    duration_us: int
    p50_us: float
    p99_us: float
    max_us: float
    errors: int

    @property
    def rps(self) -> float:
        return self.requests / (self.duration_us / 1e6) if self.duration_us else 0.0


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def _lua_string(text: str) -> str:
    # A long bracket string no body can close by accident.
    level = 1
    while "]" + "=" * level + "]" in text:
        level += 1
    eq = "=" * level
    return f"[{eq}[{text}]{eq}]"


def wrk_script(headers: dict[str, str], body: str, *, vary: tuple[str, str] | None = None) -> str:
    """The Lua script: fixed ``body``, or ``prefix .. counter .. suffix`` when ``vary``."""
    lines = ['wrk.method = "POST"']
    lines.extend(f"wrk.headers[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in headers.items())
    if vary is None:
        lines.append(f"wrk.body = {_lua_string(body)}")
    else:
        prefix, suffix = vary
        lines.append(f"local prefix = {_lua_string(prefix)}")
        lines.append(f"local suffix = {_lua_string(suffix)}")
        lines.append("local n = math.random(1, 1000000000) * 1000")
        lines.append("request = function()")
        lines.append("  n = n + 1")
        lines.append("  return wrk.format(nil, nil, nil, prefix .. n .. suffix)")
        lines.append("end")
    lines.append(
        "done = function(summary, latency, requests)\n"
        "  local e = summary.errors\n"
        '  io.write(string.format("BENCH %d %d %.1f %.1f %.1f %d\\n", summary.requests,\n'
        "    summary.duration, latency:percentile(50), latency:percentile(99), latency.max,\n"
        "    e.connect + e.read + e.write + e.status + e.timeout))\n"
        "end"
    )
    return "\n".join(lines) + "\n"


def run_wrk(
    url: str,
    script: str,
    *,
    connections: int,
    duration_s: float,
    cpu: int | None,
    timeout_s: float = 10.0,
) -> WrkResult:
    """One bounded wrk run (one thread, ``connections`` keep-alive connections)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
        path = f.name
    cmd = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(duration_s))}s",
        f"--timeout={timeout_s:g}s",
        "-s",
        path,
        url,
    ]
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 60)
    finally:
        Path(path).unlink(missing_ok=True)
    for line in out.stdout.splitlines():
        if line.startswith("BENCH "):
            n, dur, p50, p99, mx, err = line.split()[1:]
            return WrkResult(int(n), int(dur), float(p50), float(p99), float(mx), int(err))
    raise RuntimeError(f"wrk failed ({out.returncode}): {out.stdout[-500:]} {out.stderr[-500:]}")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
        except OSError:
            continue
        found.extend(int(c) for c in text.split())
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (e.g. a proxy's worker processes)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and its descendants, in seconds."""
    total = 0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / _TICK


def thread_times(pid: int) -> dict[int, tuple[float, float]]:
    """Each live thread of ``pid`` (by thread id): its user and system CPU seconds so far."""
    out: dict[int, tuple[float, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(tid)] = (int(fields[11]) / _TICK, int(fields[12]) / _TICK)
    return out


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` and its descendants, in MB."""
    total_kb = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


def pin(pid: int, cpu: int) -> None:
    """Pin every thread of ``pid`` (and of its descendants) to ``cpu``, where supported."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) <= cpu:
        return
    for p in process_tree(pid):
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(tid, {cpu})
            except OSError:
                continue


@dataclass(frozen=True, slots=True)
class Measured:
    """A wrk run plus the server's CPU and memory over it."""

    wrk: WrkResult
    cpu_us_per_req: float
    rss_mb: float


def measure(
    server_pid: int,
    url: str,
    script: str,
    *,
    connections: int,
    duration_s: float,
    cpu: int | None,
) -> Measured:
    """Run wrk against ``url`` and charge ``server_pid``'s CPU delta to its requests."""
    before = cpu_seconds(server_pid)
    result = run_wrk(url, script, connections=connections, duration_s=duration_s, cpu=cpu)
    spent = cpu_seconds(server_pid) - before
    per = spent * 1e6 / result.requests if result.requests else float("nan")
    return Measured(result, per, rss_mb(server_pid))


def _read_response(sock: socket.socket, started: float) -> tuple[float, float]:
    """Read one HTTP/1.1 response; (seconds to its first body byte, to its end)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    lower = head.lower()
    while not body:
        body = sock.recv(65536)
        if not body:
            raise ConnectionError("server closed the connection")
    first = time.perf_counter() - started
    if b"transfer-encoding: chunked" in lower:
        while not body.endswith(b"0\r\n\r\n"):
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            body += data
    else:
        i = lower.index(b"content-length:")
        length = int(lower[i + 15 :].split(b"\r\n", 1)[0])
        while len(body) < length:
            body += sock.recv(65536)
    return first, time.perf_counter() - started


def ttfb(url: str, headers: dict[str, str], body: str, *, n: int, cpu: int | None) -> float:
    """Median seconds to the first response-body byte over ``n`` sequential requests on
    one keep-alive connection (run in this process; pinned to ``cpu``)."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
    try:
        parts = urlsplit(url)
        payload = body.encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (
            f"POST {parts.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n{head}"
            f"content-length: {len(payload)}\r\n\r\n"
        ).encode() + payload
        firsts = []
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(n + 20):
                started = time.perf_counter()
                sock.sendall(request)
                first, _ = _read_response(sock, started)
                if i >= 20:  # warm-up
                    firsts.append(first)
        return statistics.median(firsts)
    finally:
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, before)


def steal_counters() -> tuple[int, int]:
    """``/proc/stat``'s CPU time stolen by the hypervisor, and all CPU time (jiffies)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_share(since: tuple[int, int]) -> float:
    """The stolen share (%) of all CPU time since ``since`` (``steal_counters()``). A host
    that steals many percent also stalls the runs: throughput then says more about the
    host than about the code."""
    steal, total = steal_counters()
    return 100.0 * (steal - since[0]) / max(total - since[1], 1)


def calibrate(cpu: int) -> float:
    """Milliseconds a fixed pure-Python loop takes on ``cpu``: how fast this host runs
    Python, to compare figures taken on different machines."""
    code = (
        "import time\nt = time.perf_counter()\ns = 0\nfor i in range(10_000_000):\n"
        "    s += i\nprint((time.perf_counter() - t) * 1000)"
    )
    best = float("inf")
    for _ in range(3):
        out = subprocess.run(
            ["taskset", "-c", str(cpu), sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
        )
        best = min(best, float(out.stdout))
    return best
