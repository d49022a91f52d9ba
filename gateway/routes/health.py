"""The unauthenticated operational routes (they live outside ``/v1``):

- ``GET /healthz``: the process is alive and its event loop answers. No I/O.
- ``GET /readyz``: the readiness checks (``gateway.observability.readiness``): 200, or
  503 with the failing checks.
- ``GET /metrics``: Prometheus text. Unauthenticated: keep it off the public listener
  (deploy/nginx.conf returns 404 for it).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.observability.metrics import CONTENT_TYPE
from gateway.observability.ops import Ops


def _ops(request: Request) -> Ops:
    ops: Ops = request.app.state.ops
    return ops


async def healthz(request: Request) -> Response:
    """Liveness: answering at all is the check."""
    return Response(b'{"status":"ok"}', media_type="application/json")


async def readyz(request: Request) -> Response:
    """Readiness: 200 unless a fatal check (database, models) fails, then 503 with the
    reasons. A failing non-fatal check (Redis) is listed in ``degraded`` and, for Redis,
    reported as ``"redis": "degraded"`` (``"ok"`` when it answers)."""
    results = await _ops(request).readiness.check()
    ready = all(r.ok or not r.fatal for r in results)
    body: dict[str, Any] = {
        "status": "ready" if ready else "unavailable",
        "checks": {r.name: {"ok": r.ok, "ms": round(r.ms, 2), "reason": r.reason} for r in results},
        "reasons": [r.reason for r in results if not r.ok and r.fatal],
        "degraded": [r.reason for r in results if not r.ok and not r.fatal],
    }
    for r in results:
        if r.name == "redis":
            body["redis"] = "ok" if r.ok else "degraded"
    return Response(
        orjson.dumps(body), status_code=200 if ready else 503, media_type="application/json"
    )


async def metrics(request: Request) -> Response:
    """Prometheus text exposition: this process's metrics, or under ``--workers N`` every
    worker's, merged."""
    return Response(_ops(request).metrics.render(), media_type=CONTENT_TYPE)
