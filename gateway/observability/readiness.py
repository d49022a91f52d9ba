"""Readiness: is this replica fit to serve (database, Redis, the model catalogue)?

``GET /readyz`` (``gateway.routes.health``) reports these checks: 200 unless a fatal one
(database, models) fails, else 503 with the failing checks. Redis (when configured) is
checked too, but an unreachable Redis only *degrades* readiness (200, ``"redis":
"degraded"``, ``syntic_redis_up`` 0): the gateway keeps serving with per-process limits,
and a Redis outage must not take every replica of a fleet out of rotation at once.

Example::

    readiness = Readiness(settings)
    readiness.database = services.db
    results = await readiness.check()
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from gateway.settings import Settings
from gateway.storage.base import StorageError

log = logging.getLogger("syntic.ops")


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One readiness check. ``reason`` is safe to show unauthenticated (no URLs, no
    driver messages: those go to the log)."""

    name: str
    ok: bool
    ms: float
    reason: str | None = None
    fatal: bool = True  # False: a failure degrades readiness but does not fail it


class Readiness:
    """Database, Redis and model-catalogue checks, each bounded by ``timeout_s``.
    Only the database and models checks are fatal; ``redis_ok`` keeps the last Redis
    result (None: not configured or not probed yet)."""

    def __init__(self, settings: Settings, timeout_s: float = 2.0) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.database: Any = None  # gateway.storage.Database, set by Ops.bind
        self.redis_ok: bool | None = None
        self._redis: Any = None
        if settings.redis_url:
            self._redis = aioredis.Redis.from_url(
                settings.redis_url,
                socket_connect_timeout=timeout_s,
                socket_timeout=timeout_s,
            )

    async def _timed(self, name: str, probe: Callable[[], Any]) -> CheckResult:
        start = time.perf_counter()
        try:
            await asyncio.wait_for(probe(), self.timeout_s)
        except TimeoutError:
            reason = f"{name} did not answer within {self.timeout_s:g} s"
        except (StorageError, aioredis.RedisError, OSError) as exc:
            log.warning("readiness: %s unreachable: %r", name, exc)
            reason = f"{name} unreachable ({type(exc).__name__})"
        else:
            return CheckResult(name, True, (time.perf_counter() - start) * 1000)
        return CheckResult(name, False, (time.perf_counter() - start) * 1000, reason)

    async def check(self) -> list[CheckResult]:
        """Run every check concurrently."""
        probes: list[Any] = []
        if self.database is None:
            probes.append(_result(CheckResult("database", False, 0.0, "database not open")))
        else:
            probes.append(self._timed("database", lambda: self.database.fetch("SELECT 1")))
        if self._redis is not None:
            probes.append(self._timed("redis", self._redis.ping))
        n = len(self.settings.models)
        models = CheckResult("models", n > 0, 0.0, None if n else "no model configured")
        probes.append(_result(models))
        results = list(await asyncio.gather(*probes))
        for i, r in enumerate(results):
            if r.name == "redis":
                self.redis_ok = r.ok
                results[i] = dataclasses.replace(r, fatal=False)  # limits fall back locally
        return results

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()


async def _result(result: CheckResult) -> CheckResult:
    return result
