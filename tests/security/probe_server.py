"""The real gateway app, served like ``syntic serve``, plus a probe for hostile-input tests.

    python -m tests.security.probe_server CONFIG PORT

``GET /__probe__`` (no auth) arms the probe on first call and returns what it saw since::

    {"cpu_stall_ms": worst CPU time the event-loop thread spent between two 5 ms ticks,
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
import sys
import time
import traceback
from typing import Any

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

LOOPBACK = {"127.0.0.1", "::1", "localhost", None, ""}
FORBIDDEN_PREFIXES = ("os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
                      "subprocess.Popen", "os.startfile", "pty.spawn")

forbidden: list[str] = []
outbound: list[str] = []


def _benign(event: str, args: tuple[Any, ...]) -> bool:
    # ctypes.util.find_library runs `ldconfig -p` (trio's thread cache does at import)
    return event == "subprocess.Popen" and list(args[1] or ())[-1:] == ["-p"] and str(
        args[0]).endswith("/ldconfig")


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
        self.wall_lag = 0.0
        self.ticks = 0

    def ensure(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        period = 0.005
        while True:
            wall, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(period)
            self.ticks += 1
            self.wall_lag = max(self.wall_lag, time.perf_counter() - wall - period)
            self.cpu_stall = max(self.cpu_stall, time.thread_time() - cpu)


ticker = Ticker()


async def probe(request: Request) -> JSONResponse:
    ticker.ensure()
    body = {"cpu_stall_ms": ticker.cpu_stall * 1000, "wall_lag_ms": ticker.wall_lag * 1000,
            "ticks": ticker.ticks, "forbidden": forbidden, "outbound": outbound}
    if request.query_params.get("reset"):
        ticker.cpu_stall = ticker.wall_lag = 0.0
    return JSONResponse(body)


def main() -> None:
    from gateway.app import create_app
    from gateway.edge_protocol import serve_options
    from gateway.logs import configure_logging, log_format_from_env
    from gateway.settings import load_settings

    config, port = sys.argv[1], int(sys.argv[2])
    settings = load_settings(config)
    configure_logging("warning", log_format_from_env({}))
    app = create_app(settings, extra_routes=(Route("/__probe__", probe, methods=["GET"]),))
    sys.addaudithook(_audit)
    uvicorn.run(app, host="127.0.0.1", port=port, loop="uvloop", log_config=None,
                access_log=False, lifespan="on", **serve_options(settings))


if __name__ == "__main__":
    main()
