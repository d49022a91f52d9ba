"""Candidate upstream HTTP clients, measured side by side: aiohttp, httpx, pyreqwest, httpr, rnet.

Not a test (pytest does not collect it) and not run by the gateway's venv: pyreqwest and
httpr are never project dependencies, so this runs from a separate venv::

    python3 -m venv /work/clients-venv
    /work/clients-venv/bin/pip install aiohttp httpx pyreqwest httpr rnet orjson trustme \
        uvloop sniffio
    /work/clients-venv/bin/python tests/bench/client_candidates.py

Two parts, every upstream in another process (loopback only):

- **CPU per call** (``time.process_time`` of the client process, so a library's own threads
  count too): (a) a ~1 KB JSON POST read whole, (b) an SSE answer of 20 events read line by
  line, both against ``tests/bench/mock_upstream.py``, and (c) the JSON POST over TLS against
  ``HostileUpstream(tls=...)`` in mode ``ok`` (trustme CA); keep-alive, one client object,
  32 concurrent callers. Each measurement is a fresh process; rounds alternate the
  candidates so drift on a shared machine hits all alike; the median per call is reported
  with its ratio to aiohttp.
- **Behaviour** against ``tests/support/hostile_upstream.py``: per library and mode, what
  the library answers or raises, the peak RSS growth of the process while reading (body
  read incrementally, stopped at 16 MiB of decompressed bytes), and the worst event-loop
  stall seen by a task ticking every 10 ms; and (``cancel-wait``) whether cancelling the
  task that awaits an answer that never comes closes the connection (the upstream sees
  the disconnect and stops generating), against a silent server in the case's own
  process. Every case runs in its own process with a
  library timeout, an asyncio guard and a watchdog thread, so the script always ends.

Each library is used as its documentation recommends for a long-lived async client: one
client object with its connection pool, created once, closed at the end. (sniffio: httpcore
imports it on every pool event and a fresh httpx install lacks it; the project's venv has it.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import platform
import re
import shlex
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MOCK = REPO / "tests" / "bench" / "mock_upstream.py"
LIBRARIES = ("aiohttp", "httpx", "pyreqwest", "httpr", "rnet")
SCENARIOS = ("json", "sse", "tls-json")
CAP = 16 << 20  # decompressed bytes read before a behaviour case stops
MODES = (
    "interim-103",
    "switch-101",
    "gzip-bomb",
    "trickle",
    "endless-line",
    "endless-line:lines",
    "invalid-utf8",
    "invalid-utf8:lines",
    "cancel-wait",
)
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
SSE_EVENTS = 20  # mock model "...-text17": role, 17 deltas, finish, usage (then [DONE])


def request_body(stream: bool, text_events: int = 0) -> bytes:
    """An OpenAI chat request of ~1 KB (its user text is echoed by the hostile upstream)."""
    model = f"bench-text{text_events}" if text_events else "bench"
    body = {
        "model": model,
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You are terse. " * 20},
            {"role": "user", "content": "Refund order 582131, it arrived damaged. " * 16},
        ],
    }
    return json.dumps(body, separators=(",", ":")).encode()


# -- the candidates -------------------------------------------------------------------------


class Candidate:
    """One library's long-lived async client: whole POSTs, chunked and line-wise streams."""

    name = ""

    def __init__(self, ca_file: str | None, timeout_s: float) -> None:
        self.ca_file = ca_file
        self.ca_pem = Path(ca_file).read_bytes() if ca_file else b""
        self.timeout_s = timeout_s

    async def open(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    async def post_whole(self, url: str, body: bytes) -> tuple[int, bytes]:
        """POST and read the whole answer with the library's own whole-body read."""
        raise NotImplementedError

    def chunks(
        self, url: str, body: bytes
    ) -> contextlib.AbstractAsyncContextManager[tuple[int, AsyncIterator[bytes]]]:
        """POST and hold the answer open: its status and decompressed body chunks."""
        raise NotImplementedError

    def lines(
        self, url: str, body: bytes
    ) -> contextlib.AbstractAsyncContextManager[tuple[int, AsyncIterator[bytes | str]]] | None:
        """The library's own line reader, or None if it has none."""
        return None


def _ssl_context(ca_file: str | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file)


class AiohttpCandidate(Candidate):
    """One ClientSession over one TCPConnector, configured as ``UpstreamHttp`` does."""

    name = "aiohttp"

    async def open(self) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(
            limit=512,
            limit_per_host=0,
            keepalive_timeout=90,
            ssl=_ssl_context(self.ca_file) if self.ca_file else True,
        )
        self.session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
        )

    async def aclose(self) -> None:
        await self.session.close()

    async def post_whole(self, url: str, body: bytes) -> tuple[int, bytes]:
        async with self.session.post(url, data=body, headers=HEADERS) as resp:
            return resp.status, await resp.read()

    @contextlib.asynccontextmanager
    async def chunks(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
        async with self.session.post(url, data=body, headers=HEADERS) as resp:
            yield resp.status, resp.content.iter_any()

    @contextlib.asynccontextmanager
    async def _lines(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes | str]]]:
        async def each() -> AsyncIterator[bytes | str]:
            async for line in resp.content:  # StreamReader.readline
                yield line

        async with self.session.post(url, data=body, headers=HEADERS) as resp:
            yield resp.status, each()

    def lines(
        self, url: str, body: bytes
    ) -> contextlib.AbstractAsyncContextManager[tuple[int, AsyncIterator[bytes | str]]] | None:
        return self._lines(url, body)


class HttpxCandidate(Candidate):
    """One AsyncClient (httpcore's pool)."""

    name = "httpx"

    async def open(self) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            limits=httpx.Limits(
                max_connections=512, max_keepalive_connections=512, keepalive_expiry=90
            ),
            timeout=httpx.Timeout(self.timeout_s),
            trust_env=False,
            verify=_ssl_context(self.ca_file) if self.ca_file else True,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def post_whole(self, url: str, body: bytes) -> tuple[int, bytes]:
        resp = await self.client.post(url, content=body, headers=HEADERS)
        return resp.status_code, resp.content

    @contextlib.asynccontextmanager
    async def chunks(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
        async with self.client.stream("POST", url, content=body, headers=HEADERS) as resp:
            yield resp.status_code, resp.aiter_bytes()

    @contextlib.asynccontextmanager
    async def _lines(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes | str]]]:
        async def each() -> AsyncIterator[bytes | str]:
            async for line in resp.aiter_lines():
                yield line

        async with self.client.stream("POST", url, content=body, headers=HEADERS) as resp:
            yield resp.status_code, each()

    def lines(
        self, url: str, body: bytes
    ) -> contextlib.AbstractAsyncContextManager[tuple[int, AsyncIterator[bytes | str]]] | None:
        return self._lines(url, body)


class PyreqwestCandidate(Candidate):
    """One ``ClientBuilder().build()`` client (reqwest/hyper on a tokio runtime)."""

    name = "pyreqwest"

    async def open(self) -> None:
        from pyreqwest.client import ClientBuilder  # type: ignore[import-not-found,unused-ignore]

        builder = ClientBuilder().timeout(timedelta(seconds=self.timeout_s))
        if self.ca_file:
            builder = builder.add_root_certificate_pem(self.ca_pem)
        self.client = builder.build()

    async def aclose(self) -> None:
        await self.client.close()

    async def post_whole(self, url: str, body: bytes) -> tuple[int, bytes]:
        resp = await self.client.post(url).headers(HEADERS).body_bytes(body).build().send()
        return int(resp.status), bytes(await resp.bytes())

    @contextlib.asynccontextmanager
    async def chunks(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
        async def each() -> AsyncIterator[bytes]:
            while (chunk := await resp.body_reader.read_chunk()) is not None:
                yield bytes(chunk)

        request = self.client.post(url).headers(HEADERS).body_bytes(body).build_streamed()
        async with request as resp:
            yield int(resp.status), each()


class HttprCandidate(Candidate):
    """One AsyncClient (a blocking reqwest client driven from a thread pool)."""

    name = "httpr"

    async def open(self) -> None:
        import httpr  # type: ignore[import-not-found,unused-ignore]

        self.client = httpr.AsyncClient(
            timeout=self.timeout_s,
            ca_cert_file=self.ca_file,
            cookie_store=False,
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def post_whole(self, url: str, body: bytes) -> tuple[int, bytes]:
        resp = await self.client.post(url, content=body, headers=HEADERS)
        return int(resp.status_code), bytes(resp.content)

    @contextlib.asynccontextmanager
    async def chunks(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
        async with self.client.stream("POST", url, content=body, headers=HEADERS) as resp:
            yield int(resp.status_code), resp.aiter_bytes()

    @contextlib.asynccontextmanager
    async def _lines(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes | str]]]:
        async with self.client.stream("POST", url, content=body, headers=HEADERS) as resp:
            yield int(resp.status_code), resp.aiter_lines()

    def lines(
        self, url: str, body: bytes
    ) -> contextlib.AbstractAsyncContextManager[tuple[int, AsyncIterator[bytes | str]]] | None:
        return self._lines(url, body)


class RnetCandidate(Candidate):
    """One ``rnet.Client`` (wreq/hyper on a tokio runtime; timeouts in whole seconds)."""

    name = "rnet"

    async def open(self) -> None:
        import rnet  # type: ignore[import-not-found,unused-ignore]

        self.client = rnet.Client(
            timeout=max(1, round(self.timeout_s)),
            no_proxy=True,
            gzip=True,
            pool_max_size=512,
            pool_idle_timeout=90,
            verify=Path(self.ca_file) if self.ca_file else True,
        )

    async def aclose(self) -> None:
        return None  # the client has no close; its pool goes with the object

    async def post_whole(self, url: str, body: bytes) -> tuple[int, bytes]:
        resp = await self.client.post(url, body=body, headers=HEADERS)
        return int(resp.status), bytes(await resp.bytes())

    @contextlib.asynccontextmanager
    async def chunks(
        self, url: str, body: bytes
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
        resp = await self.client.post(url, body=body, headers=HEADERS)

        async def each() -> AsyncIterator[bytes]:
            async for chunk in resp.stream():
                yield bytes(chunk)

        try:
            yield int(resp.status), each()
        finally:
            await resp.close()


CANDIDATES: dict[str, type[Candidate]] = {
    c.name: c
    for c in (AiohttpCandidate, HttpxCandidate, PyreqwestCandidate, HttprCandidate, RnetCandidate)
}


class LineSplitter:
    """Bytes to complete lines; a line's pieces are joined once, when its newline comes."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            self.pending.append(chunk)
            return []
        pieces = chunk.split(b"\n")
        first = b"".join([*self.pending, pieces[0]])
        self.pending = [pieces[-1]] if pieces[-1] else []
        return [first, *pieces[1:-1]]


def install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


# -- child: CPU per call ---------------------------------------------------------------------


async def cpu_case(
    lib: str, scenario: str, url: str, calls: int, concurrency: int, ca_file: str | None
) -> dict[str, Any]:
    cand = CANDIDATES[lib](ca_file, 60.0)
    await cand.open()
    stream = scenario == "sse"
    body = request_body(stream, SSE_EVENTS - 3 if stream else 0)
    want_lines = 2 * (SSE_EVENTS + 1)  # each event and [DONE], each followed by a blank

    async def one() -> int:
        if not stream:
            status, data = await cand.post_whole(url, body)
            if status != 200 or not data.endswith(b"}"):
                raise RuntimeError(f"{lib}: bad answer {status} {data[:80]!r}")
            return 1
        count = 0
        splitter = LineSplitter()
        async with cand.chunks(url, body) as (status, chunks):
            async for chunk in chunks:
                count += len(splitter.feed(chunk))
        if status != 200 or count != want_lines:
            raise RuntimeError(f"{lib}: {status}, {count} lines, not {want_lines}")
        return 1

    async def worker(n: int) -> None:
        for _ in range(n):
            await one()

    async def run(total: int) -> None:
        share, extra = divmod(total, concurrency)
        await asyncio.gather(*(worker(share + (i < extra)) for i in range(concurrency)))

    await run(concurrency * 4)  # warm-up: every connection open, every code path imported
    wall0, cpu0 = time.perf_counter(), time.process_time()
    await run(calls)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await cand.aclose()
    return {"cpu_us": cpu / calls * 1e6, "wall_s": wall}


# -- child: behaviour against the hostile upstream --------------------------------------------


def _status_kib() -> tuple[int, int]:
    text = Path("/proc/self/status").read_text()
    rss = re.search(r"VmRSS:\s+(\d+)", text)
    hwm = re.search(r"VmHWM:\s+(\d+)", text)
    return (int(rss[1]) if rss else 0), (int(hwm[1]) if hwm else 0)


def _describe(exc: BaseException) -> str:
    text = getattr(exc, "message", None)  # pyreqwest's str() is its args tuple
    message = " ".join((text if isinstance(text, str) else str(exc)).split())[:90]
    return f"{type(exc).__module__}.{type(exc).__qualname__}" + (f": {message}" if message else "")


def _reset_peak_rss() -> int:
    """VmHWM starts again from the current RSS (KiB, returned)."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kib()[0]


@dataclass
class Probe:
    """Loop-lag probe: the longest gap beyond its 10 ms tick, and when it last ran."""

    worst_s: float = 0.0
    last: float = 0.0

    async def run(self) -> None:
        self.last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.worst_s = max(self.worst_s, now - self.last - 0.01)
            self.last = now

    def worst_now(self) -> float:
        return max(self.worst_s, time.perf_counter() - self.last - 0.01)


async def read_case(cand: Candidate, mode: str, url: str) -> str:
    """What the library does with one hostile answer, read incrementally up to ``CAP``."""
    base, _, how = mode.partition(":")
    stream = base in ("endless-line", "invalid-utf8")
    body = request_body(stream)
    if how == "lines":
        opened = cand.lines(url, body)
        if opened is None:
            return "n/a: no line reader (the chunk reader above is the way)"
        total = 0
        seen: list[bytes | str] = []
        async with opened as (status, reader):
            async for line in reader:
                total += len(line)
                if len(line) >= CAP:
                    return (
                        f"HTTP {status}: one line of {len(line) >> 20} MiB, held whole "
                        "until the body ended"
                    )
                if len(seen) < 8:
                    seen.append(line)
                if total >= CAP:
                    return f"HTTP {status}: cap hit after {total >> 20} MiB of lines"
        bad = [
            s
            for s in seen
            if (b"\xff" in s if isinstance(s, bytes) else "\ufffd" in s or "\udcff" in s)
        ]
        unit = "B in bytes" if seen and isinstance(seen[0], bytes) else "chars in str"
        shown = "none"
        if bad:  # the two bytes after '"content":"' (\xff\xfe as sent)
            line = bad[0]
            shown = (
                repr(line[line.find(b'"content":"') + 11 :][:2])
                if isinstance(line, bytes)
                else repr(line[line.find('"content":"') + 11 :][:2])
            )
        return f"HTTP {status}: {total} {unit} lines; the bad bytes came as {shown}"
    total = count = 0
    splitter = LineSplitter()
    lines: list[bytes] = []
    async with cand.chunks(url, body) as (status, chunks):
        async for chunk in chunks:
            total += len(chunk)
            count += 1
            if stream:
                lines.extend(splitter.feed(chunk)[:8])
            if total >= CAP:
                return (
                    f"HTTP {status}: cap hit at {total >> 20} MiB read, chunks of "
                    f"{total // count >> 10} KiB on average"
                )
    if stream:
        bad = [line for line in lines if b"\xff" in line]
        return (
            f"HTTP {status}: {total} B, {len(lines)} lines; raw bytes kept: "
            f"{'yes' if bad else 'no'}"
        )
    return f"HTTP {status}: {total} B read"


async def cancel_case(cand: Candidate) -> str:
    """Cancel a call whose answer never comes; did the upstream see its connection close?"""
    closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass  # the request, then nothing: an upstream still generating
        closed.set()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    call = asyncio.ensure_future(
        cand.post_whole(f"http://127.0.0.1:{port}/v1/chat/completions", request_body(False))
    )
    await asyncio.sleep(0.5)  # the request is out, the head awaited
    call.cancel()
    with contextlib.suppress(BaseException):
        await call
    cancelled = time.perf_counter()
    try:
        await asyncio.wait_for(closed.wait(), 3.0)
        outcome = (
            f"connection closed {1000 * (time.perf_counter() - cancelled):.0f} ms after the cancel"
        )
    except TimeoutError:
        outcome = "connection still open 3 s after the cancel (the upstream keeps generating)"
    server.close()
    return outcome


async def behaviour_case(lib: str, mode: str, url: str) -> dict[str, Any]:
    timeout_s = 2.0 if mode == "trickle" else 10.0
    cand = CANDIDATES[lib](None, timeout_s)
    await cand.open()
    warm = url.replace(f"/{mode.partition(':')[0]}/", "/ok/")  # cancel-wait: any path
    status, _ = await cand.post_whole(warm, request_body(False))  # the pool and lazy imports
    if status != 200:
        raise RuntimeError(f"{lib}: warm-up answered {status}")
    probe = Probe()
    ticker = asyncio.create_task(probe.run())
    await asyncio.sleep(0.05)
    rss0 = _reset_peak_rss()
    started = time.perf_counter()
    result: dict[str, Any] = {}

    def report(outcome: str) -> dict[str, Any]:
        _, hwm = _status_kib()
        return {
            "outcome": outcome,
            "rss_mib": (hwm - rss0) / 1024,
            "stall_ms": probe.worst_now() * 1000,
            "seconds": time.perf_counter() - started,
        }

    def watchdog() -> None:  # the loop may be blocked: report from a thread, then end
        if not done.wait(timeout_s + 12):
            print(json.dumps(report("hung: no end 12 s past its timeout (watchdog)")), flush=True)
            os._exit(0)

    done = threading.Event()
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        async with asyncio.timeout(timeout_s + 4):
            outcome = await (
                cancel_case(cand) if mode == "cancel-wait" else read_case(cand, mode, url)
            )
    except TimeoutError as exc:
        outcome = (
            f"no end and no library timeout: asyncio guard at {timeout_s + 4:g} s"
            if time.perf_counter() - started >= timeout_s + 3.9
            else _describe(exc)
        )
    except Exception as exc:
        outcome = _describe(exc)
    result = report(outcome)
    done.set()
    ticker.cancel()
    with contextlib.suppress(Exception):
        async with asyncio.timeout(5):
            await cand.aclose()
    return result


# -- child: the hostile upstream --------------------------------------------------------------


def serve_hostile(tls_dir: str | None) -> None:
    """HostileUpstream until stdin closes (its parent went); prints its port."""
    sys.path.insert(0, str(REPO))
    hostile = importlib.import_module("tests.support.hostile_upstream")
    context = None
    if tls_dir:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(Path(tls_dir) / "server.pem")
    upstream = hostile.HostileUpstream(tls=context).start()
    upstream.bomb()  # built now, not during the first gzip-bomb case
    print(upstream.port, flush=True)
    sys.stdin.read()
    upstream.stop()


# -- parent ----------------------------------------------------------------------------------


def _spawn_server(args: list[str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise RuntimeError(f"upstream did not start: {args}")
    return proc, int(line)


def _child(args: list[str], limit_s: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"outcome": f"killed at {limit_s:g}s", "error": True}
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            found: dict[str, Any] = json.loads(line)
            return found
    return {"outcome": f"child exited {proc.returncode} without a result", "error": True}


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(Exception):
        if proc.stdin is not None:
            proc.stdin.close()
        proc.terminate()
        proc.wait(10)
    if proc.poll() is None:
        proc.kill()


def _make_tls(directory: Path) -> Path:
    trustme = importlib.import_module("trustme")  # a test extra, not always installed
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    return directory / "ca.pem"


def machine_line(command: str) -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = found[1].strip() if found else "?"
    versions = ", ".join(
        f"{name} {metadata.version(name)}" for name in (*LIBRARIES, "httpcore", "uvloop")
    )
    return (
        f"nproc {os.cpu_count()}, CPU {cpu}, Python {platform.python_version()}, "
        f"{versions}; command: `{command}`"
    )


def run_cpu(calls: int, rounds: int, concurrency: int, libs: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        ca_file = _make_tls(Path(tmp))
        mock, mock_port = _spawn_server([str(MOCK), "--port", "0"])
        tls, tls_port = _spawn_server([__file__, "--serve-hostile", "--tls-dir", tmp])
        urls = {
            "json": f"http://127.0.0.1:{mock_port}/v1/chat/completions",
            "sse": f"http://127.0.0.1:{mock_port}/v1/chat/completions",
            "tls-json": f"https://127.0.0.1:{tls_port}/ok/v1/chat/completions",
        }
        figures: dict[tuple[str, str], list[float]] = {}
        try:
            for r in range(rounds):
                order = libs[r % len(libs) :] + libs[: r % len(libs)]
                for scenario in SCENARIOS:
                    for lib in order:
                        args = [
                            "--cpu-case",
                            lib,
                            scenario,
                            urls[scenario],
                            str(calls),
                            str(concurrency),
                        ]
                        if scenario == "tls-json":
                            args += ["--ca", str(ca_file)]
                        got = _child(args, 180)
                        if "cpu_us" not in got:
                            raise RuntimeError(f"{lib} {scenario}: {got}")
                        figures.setdefault((lib, scenario), []).append(got["cpu_us"])
                        print(
                            f"round {r + 1} {scenario:8} {lib:9} {got['cpu_us']:7.1f} us/call"
                            f" ({got['wall_s']:.2f} s wall)",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            _stop(mock)
            _stop(tls)
    head = (
        "| library | "
        + " | ".join(f"{s}: CPU µs/call (runs) | vs aiohttp" for s in SCENARIOS)
        + " |"
    )
    rows = [head, "|---" * (1 + 2 * len(SCENARIOS)) + "|"]
    for lib in libs:
        cells = [lib]
        for scenario in SCENARIOS:
            runs = figures[(lib, scenario)]
            base = statistics.median(figures.get(("aiohttp", scenario), runs))
            med = statistics.median(runs)
            cells.append(f"**{med:.0f}** ({', '.join(f'{x:.0f}' for x in runs)})")
            cells.append(f"{med / base:.2f}×")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def run_behaviour(libs: list[str], modes: list[str], runs: int) -> str:
    hostile, port = _spawn_server([__file__, "--serve-hostile"])
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for r in range(runs):
            order = libs[r % len(libs) :] + libs[: r % len(libs)]
            for mode in modes:
                for lib in order:
                    url = f"http://127.0.0.1:{port}/{mode.partition(':')[0]}/v1/chat/completions"
                    one = _child(["--behaviour-case", lib, mode, url], 60)
                    found.setdefault((lib, mode), []).append(one)
                    print(f"run {r + 1} {lib} {mode}: {one}", file=sys.stderr, flush=True)
    finally:
        _stop(hostile)
    rows = [
        "| library | mode | what the library did | peak RSS growth, MiB | worst loop stall, ms |",
        "|---|---|---|---|---|",
    ]

    def figures(got: list[dict[str, Any]], key: str) -> str:
        values = [g[key] for g in got if key in g]
        if not values:
            return "?"
        return f"**{statistics.median(values):.0f}** ({', '.join(f'{v:.0f}' for v in values)})"

    for mode in modes:
        for lib in libs:
            got = found[(lib, mode)]
            outcome = str(got[0]["outcome"])
            others = {str(g["outcome"]) for g in got[1:]}
            if any(re.sub(r"\d+", "#", o) != re.sub(r"\d+", "#", outcome) for o in others):
                outcome += " [other runs: " + "; ".join(sorted(others)) + "]"
            seconds = [g["seconds"] for g in got if "seconds" in g]
            if seconds:
                outcome += f" ({statistics.median(seconds):.1f} s)"
            outcome = outcome.replace("|", "\\|")
            rows.append(
                f"| {lib} | {mode} | {outcome} | {figures(got, 'rss_mib')} | "
                f"{figures(got, 'stall_ms')} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3, help="CPU rounds")
    parser.add_argument("--runs", type=int, default=3, help="behaviour runs")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--libs", default=",".join(LIBRARIES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--only", choices=("cpu", "behaviour"))
    parser.add_argument("--serve-hostile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tls-dir", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    parser.add_argument("--cpu-case", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--behaviour-case", nargs=3, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.serve_hostile:
        serve_hostile(ns.tls_dir)
        return
    if ns.cpu_case or ns.behaviour_case:
        install_uvloop()  # the gateway's loop
        job: Callable[[], Awaitable[dict[str, Any]]]
        if ns.cpu_case:
            lib, scenario, url, calls, conc = ns.cpu_case
            job = lambda: cpu_case(lib, scenario, url, int(calls), int(conc), ns.ca)  # noqa: E731
        else:
            lib, mode, url = ns.behaviour_case
            job = lambda: behaviour_case(lib, mode, url)  # noqa: E731
        print(json.dumps(asyncio.run(job())), flush=True)
        os._exit(0)  # a library's leftover threads must not keep the case alive
    command = shlex.join([sys.executable, os.path.relpath(__file__, REPO), *sys.argv[1:]])
    libs = ns.libs.split(",")
    print(machine_line(command) + "\n")
    if ns.only != "behaviour":
        print(
            f"CPU per call ({ns.calls} calls x {ns.rounds} rounds, {ns.concurrency} "
            "concurrent callers, keep-alive; median, the runs in brackets):\n"
        )
        print(run_cpu(ns.calls, ns.rounds, ns.concurrency, libs) + "\n", flush=True)
    if ns.only != "cpu":
        print(
            f"Behaviour against HostileUpstream (cap {CAP >> 20} MiB decompressed, "
            f"{ns.runs} runs; median, the runs in brackets):\n"
        )
        print(run_behaviour(libs, ns.modes.split(","), ns.runs), flush=True)


if __name__ == "__main__":
    main()
