"""The real gateway app, served like ``syntic serve``, plus a probe for hostile-input tests.

    python -m tests.security.probe_server CONFIG PORT

``GET /__probe__`` (no auth) arms the probe on first call and returns what it saw since::

    {"cpu_stall_ms": worst CPU time the event-loop thread spent between two 5 ms ticks,
     "cpu_stall_ex_gc_ms": the same without the cyclic GC's collections on that thread,
     "gc_ms": worst collection per generation and thread,
     "wall_lag_ms": worst lateness of a tick (includes waiting for a shared CPU),
     "ticks": n, "forbidden": [audit events: os.system, subprocess, exec*, spawn ...],
     "outbound": [non-loopback socket.connect / getaddrinfo targets]}

``?reset=1`` zeroes the stall figures. The CPU figure isolates stalls *caused* by the
gateway (a validation or compile hogging the loop) from the machine being busy; the
audit hook (``sys.addaudithook``) sees every process spawn and socket connect, including
ones a code-injection payload would make.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import traceback
from typing import Any

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

LOOPBACK = {"127.0.0.1", "::1", "localhost", None, ""}
FORBIDDEN_PREFIXES = (
    "os.system",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "subprocess.Popen",
    "os.startfile",
    "pty.spawn",
)

forbidden: list[str] = []
outbound: list[str] = []


def _benign(event: str, args: tuple[Any, ...]) -> bool:
    # ctypes.util.find_library runs `ldconfig -p` (trio's thread cache does at import)
    return (
        event == "subprocess.Popen"
        and list(args[1] or ())[-1:] == ["-p"]
        and str(args[0]).endswith("/ldconfig")
    )


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event.startswith(FORBIDDEN_PREFIXES) and not _benign(event, args):
        where = " <- ".join(
            f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in traceback.extract_stack()[-12:-1]
        )
        forbidden.append(f"{event} {str(args)[:200]} at {where}")
    elif event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None
        if isinstance(address, tuple) and host not in LOOPBACK:
            outbound.append(f"connect {address!r}")
    elif event == "socket.getaddrinfo" and not _loopback_name(args[0]):
        outbound.append(f"getaddrinfo {args[0]!r}")


def _loopback_name(host: Any) -> bool:
    return host in LOOPBACK or str(host).startswith("127.")


class Ticker:
    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.cpu_stall = 0.0
        self.cpu_stall_ex_gc = 0.0
        self.wall_lag = 0.0
        self.ticks = 0

    def ensure(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        period = 0.005
        while True:
            wall, cpu, collected = time.perf_counter(), time.thread_time(), loop_gc_total[0]
            await asyncio.sleep(period)
            self.ticks += 1
            self.wall_lag = max(self.wall_lag, time.perf_counter() - wall - period)
            used = time.thread_time() - cpu
            self.cpu_stall = max(self.cpu_stall, used)
            self.cpu_stall_ex_gc = max(self.cpu_stall_ex_gc, used - (loop_gc_total[0] - collected))


ticker = Ticker()
gc_pauses: dict[str, float] = {}  # worst collection per "generation/thread" (diagnostics)
_gc_started = [0.0]
loop_gc_total = [0.0]  # seconds the loop thread spent collecting, in total


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
        return
    on_loop = threading.current_thread() is threading.main_thread()
    took = time.perf_counter() - _gc_started[0]
    if on_loop:
        loop_gc_total[0] += took
    key = f"gen{info['generation']}/{'loop' if on_loop else 'worker'}"
    gc_pauses[key] = max(gc_pauses.get(key, 0.0), took * 1000)


async def probe(request: Request) -> JSONResponse:
    ticker.ensure()
    body = {
        "cpu_stall_ms": ticker.cpu_stall * 1000,
        "wall_lag_ms": ticker.wall_lag * 1000,
        "cpu_stall_ex_gc_ms": ticker.cpu_stall_ex_gc * 1000,
        "ticks": ticker.ticks,
        "forbidden": forbidden,
        "outbound": outbound,
        "gc_ms": dict(gc_pauses),
    }
    if request.query_params.get("reset"):
        ticker.cpu_stall = ticker.wall_lag = ticker.cpu_stall_ex_gc = 0.0
        gc_pauses.clear()
    return JSONResponse(body)


def main() -> None:
    from gateway.app import create_app
    from gateway.observability.logs import configure_logging, log_format_from_env
    from gateway.server.process import freeze_startup_heap
    from gateway.server.protocol import serve_options
    from gateway.settings import load_settings

    config, port = sys.argv[1], int(sys.argv[2])
    settings = load_settings(config)
    configure_logging("warning", log_format_from_env({}))
    app = create_app(settings, extra_routes=(Route("/__probe__", probe, methods=["GET"]),))
    freeze_startup_heap()  # as `syntic serve` does
    sys.addaudithook(_audit)
    gc.callbacks.append(_on_gc)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        log_config=None,
        access_log=False,
        lifespan="on",
        **serve_options(settings),
    )


if __name__ == "__main__":
    main()
