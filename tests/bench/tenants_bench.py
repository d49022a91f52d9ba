"""One tenant's abuse against another tenant's latency, through a real gateway.

Two scenarios, each a victim client sending one small chat request at a time, measured
alone and then while an attacker key runs beside it:

- ``fair-share``: the upstream serves ``--capacity`` calls at once (``--service-ms`` each,
  the rest queue there); the attacker floods the same model with ``--flood`` concurrent
  loops. Rows with the model's ``max_concurrent`` set to the capacity (one key at most
  half of it) and unset (the attacker fills the upstream). Target: the victim's p50
  moves by no more than 2x.
- ``large-bodies``: one attacker connection sends ~3 MB bodies of 100,000 tiny items
  back to back (to ``/v1/responses`` and to chat: refused at ``max_input_items`` after a
  parse in a worker; and from a key over its rate limit: 429 before any parse). Target:
  the victim's p99 stays under 50 ms above its unloaded p99.

Each row is one JSON line on stdout, with ``target_met``. Run::

    python tests/bench/tenants_bench.py fair-share large-bodies --duration 5
    python -m tests.bench run fair-share large-bodies --duration 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.gateway_proc import (  # noqa: E402
    GatewayProcess,
    free_port,
    model_table,
    start_gateway,
)

ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1764460800,
        "model": "mock",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }
)
SMALL = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Upstream:
    """A chat upstream that serves ``capacity`` calls at once, ``service_s`` each (the rest
    wait their turn), in its own process so that it shares no GIL with the load."""

    def __init__(self, capacity: int, service_s: float) -> None:
        self.capacity, self.service_s = capacity, service_s
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Upstream:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve-upstream",
                str(self.port),
                str(self.capacity),
                str(self.service_s),
            ]
        )
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.05)

    def __exit__(self, *_: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def serve_upstream(port: int, capacity: int, service_s: float) -> None:
    slots: list[asyncio.Semaphore] = []

    async def chat(request: Request) -> Response:
        await request.body()
        if service_s:
            if not slots:
                slots.append(asyncio.Semaphore(capacity))
            async with slots[0]:
                await asyncio.sleep(service_s)
        return Response(ANSWER, media_type="application/json")

    async def alive(_request: Request) -> Response:
        return Response(b"{}", media_type="application/json")

    app = Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/", alive)]
    )
    uvicorn.run(app, port=port, log_level="warning", lifespan="off")


def _headers(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}", "content-type": "application/json"}


async def _victim(gw: GatewayProcess, key: str, duration: float) -> list[float]:
    """Latencies (ms) of one small request at a time for ``duration`` seconds."""
    out: list[float] = []
    body = orjson.dumps(SMALL)
    async with httpx.AsyncClient(base_url=gw.base_url, headers=_headers(key), timeout=60) as client:
        await client.post("/v1/chat/completions", content=body)  # warm the connection
        end = time.monotonic() + duration
        while time.monotonic() < end:
            start = time.perf_counter()
            res = await client.post("/v1/chat/completions", content=body)
            out.append((time.perf_counter() - start) * 1000)
            assert res.status_code == 200, res.text
    return out


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _loop(
    gw: GatewayProcess,
    key: str,
    path: str,
    body: bytes,
    retry_after: float,
    stop: asyncio.Event,
    statuses: dict[int, int],
) -> None:
    """Send ``body`` again and again; after a 429, wait ``retry_after`` times what the
    gateway asks (1: an SDK's backoff; 0.005: a client that comes straight back)."""
    async with httpx.AsyncClient(
        base_url=gw.base_url, headers=_headers(key), timeout=120
    ) as client:
        while not stop.is_set():
            try:
                res = await client.post(path, content=body)
            except httpx.HTTPError:
                statuses[-1] = statuses.get(-1, 0) + 1
                continue
            statuses[res.status_code] = statuses.get(res.status_code, 0) + 1
            if res.status_code == 429:  # as both SDKs do: back off for retry-after
                await _pause(stop, float(res.headers.get("retry-after", "1")) * retry_after)


async def _under(
    victim: Callable[[], Awaitable[list[float]]],
    attackers: list[Callable[[asyncio.Event, dict[int, int]], Awaitable[None]]],
) -> tuple[list[float], dict[int, int]]:
    stop = asyncio.Event()
    statuses: dict[int, int] = {}
    tasks = [asyncio.ensure_future(a(stop, statuses)) for a in attackers]
    await asyncio.sleep(0.5)  # the attack is in full swing before the victim measures
    try:
        return await victim(), statuses
    finally:
        stop.set()
        await asyncio.gather(*tasks)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(alone: list[float], loaded: list[float]) -> dict[str, Any]:
    return {
        "alone_requests": len(alone),
        "loaded_requests": len(loaded),
        "alone_p50_ms": statistics.median(alone),
        "alone_p99_ms": _pct(alone, 0.99),
        "loaded_p50_ms": statistics.median(loaded),
        "loaded_p99_ms": _pct(loaded, 0.99),
    }


def _fair_row(up: Upstream, bounded: bool, duration: float, flood: int) -> dict[str, Any]:
    extra = {"max_concurrent": up.capacity} if bounded else {}
    gw = start_gateway(
        Path(tempfile.mkdtemp(prefix="syntic-fair-")), [model_table("m", up.base_url, **extra)]
    )
    try:
        flooder = functools.partial(
            _loop, gw, gw.create_key("flood"), "/v1/chat/completions", orjson.dumps(SMALL), 1.0
        )
        alone = asyncio.run(_victim(gw, gw.api_key, duration))
        loaded, statuses = asyncio.run(
            _under(functools.partial(_victim, gw, gw.api_key, duration), [flooder] * flood)
        )
    finally:
        gw.stop()
    row = {
        "scenario": "fair-share",
        "model_max_concurrent": up.capacity if bounded else None,
        "capacity": up.capacity,
        "service_ms": up.service_s * 1000,
        "flood": flood,
        "attacker_statuses": statuses,
        **_summary(alone, loaded),
    }
    row["p50_ratio"] = row["loaded_p50_ms"] / row["alone_p50_ms"]
    # The target is the bounded model's; the unbounded row shows what it prevents.
    row["target_met"] = row["p50_ratio"] <= 2.0 or not bounded
    return row


def fair_share(duration: float, capacity: int, service_ms: float, flood: int) -> list[Any]:
    with Upstream(capacity, service_ms / 1000) as up:
        return [_fair_row(up, bounded, duration, flood) for bounded in (True, False)]


def _tiny_items_body(path: str, items: int) -> bytes:
    tiny = [{"role": "user", "content": "hi"} for _ in range(items)]
    field = "input" if path == "/v1/responses" else "messages"
    return orjson.dumps({"model": "m", field: tiny})


def large_bodies(duration: float, items: int) -> list[Any]:
    rows = []
    with Upstream(1, 0.0) as up:
        gw = start_gateway(
            Path(tempfile.mkdtemp(prefix="syntic-bodies-")),
            [model_table("m", up.base_url)],
            server={"max_body_bytes": 8 * 1024 * 1024},
        )
        try:
            limited = gw.create_key("limited", "--rpm", "1")
            plain = gw.create_key("bodies")
            alone = asyncio.run(_victim(gw, gw.api_key, duration))
            for path, key, label in (
                ("/v1/responses", plain, "items"),
                ("/v1/chat/completions", plain, "items"),
                ("/v1/responses", limited, "rate-limited"),
            ):
                body = _tiny_items_body(path, items)
                attacker = functools.partial(_loop, gw, key, path, body, 0.005)
                loaded, statuses = asyncio.run(
                    _under(functools.partial(_victim, gw, gw.api_key, duration), [attacker])
                )
                row = {
                    "scenario": "large-bodies",
                    "path": path,
                    "attacker": label,
                    "body_bytes": len(body),
                    "items": items,
                    "attacker_statuses": statuses,
                    **_summary(alone, loaded),
                }
                row["p99_added_ms"] = row["loaded_p99_ms"] - row["alone_p99_ms"]
                row["target_met"] = row["p99_added_ms"] < 50.0
                rows.append(row)
        finally:
            gw.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "scenarios", nargs="*", metavar="fair-share|large-bodies", help="default: both"
    )
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--service-ms", type=float, default=50.0)
    parser.add_argument("--flood", type=int, default=64)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument(
        "--fail-on-miss", action="store_true", help="exit 1 when a row misses its target"
    )
    parser.add_argument(
        "--serve-upstream",
        nargs=3,
        default=None,
        metavar=("PORT", "C", "S"),
        help=argparse.SUPPRESS,
    )
    ns = parser.parse_args()
    if ns.serve_upstream is not None:
        port, capacity, service_s = ns.serve_upstream
        serve_upstream(int(port), int(capacity), float(service_s))
        return 0
    wanted = set(ns.scenarios or ("fair-share", "large-bodies"))
    if wanted - {"fair-share", "large-bodies"}:
        parser.error(f"unknown scenario(s) {sorted(wanted - {'fair-share', 'large-bodies'})}")
    rows: list[Any] = []
    if "fair-share" in wanted:
        rows += fair_share(ns.duration, ns.capacity, ns.service_ms, ns.flood)
    if "large-bodies" in wanted:
        rows += large_bodies(ns.duration, ns.items)
    for row in rows:
        print(json.dumps(row))
    return 1 if ns.fail_on_miss and not all(r["target_met"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
