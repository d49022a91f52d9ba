"""The composition root: ``create_app(settings)`` wires routes, middleware and lifespan.

The lifespan opens the storage-backed services (keys, ledger, rate limiter; see
``gateway.lifespan``) unless they are passed in, one ``UpstreamHttp`` shared by every
upstream adapter, the upstream registry and the ``ChatService``; on shutdown it
closes the upstreams and flushes the ledger.

Example::

    app = create_app(load_settings("gateway.toml"))
    uvicorn.run(app, port=8080)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route

from gateway.admin import AdminAuthMiddleware
from gateway.keys.base import KeyStore
from gateway.middleware.auth import AuthMiddleware
from gateway.middleware.envelope import GatewayMiddleware
from gateway.middleware.idempotency import IdempotencyMiddleware
from gateway.middleware.limits import EdgeLimits
from gateway.observability import multiprocess
from gateway.observability.logs import configure_logging, log_format_from_env
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.ops import Ops
from gateway.offload import Offload
from gateway.ratelimit.base import RateLimiter
from gateway.routes.table import idempotent_paths, metric_paths, starlette_routes
from gateway.routes.unrouted import SlashRedirect, http_exception
from gateway.server.draining import Draining
from gateway.server.process import freeze_startup_heap
from gateway.service import ChatService
from gateway.settings import Settings, load_settings
from gateway.stored import ResponseStore
from gateway.upstream.base import Upstream
from gateway.upstream.connection import Connections
from gateway.upstream.registry import UpstreamRegistry
from gateway.upstream.transport import UpstreamHttp
from gateway.usage.base import Ledger


class ServicesLike(Protocol):
    """What the app needs from ``gateway.lifespan.Services`` (tests may pass their own)."""

    @property
    def keys(self) -> KeyStore: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def limiter(self) -> RateLimiter: ...
    @property
    def responses(self) -> ResponseStore: ...
    async def aclose(self) -> None: ...


class GatewayApp(Starlette):
    """The gateway's Starlette app, with ``SlashRedirect`` as its router's trailing-slash
    redirect. Starlette's own server-error layer stays outermost; ``GatewayMiddleware``,
    next in line, answers every exception with the envelope before it could."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        SlashRedirect.install(self.router)  # relative Location, never from Host
        # Set by the lifespan, read on every request: plain attributes, as ``app.state``
        # answers through ``__getattr__`` only after a failed lookup has built an error.
        self.service: ChatService | None = None
        self.services: ServicesLike | None = None


async def _open_services(settings: Settings) -> ServicesLike:
    from gateway.lifespan import open_services

    return await open_services(settings)


def create_app(
    settings: Settings,
    services: ServicesLike | None = None,
    *,
    upstreams: Mapping[str, Upstream] | None = None,
    extra_routes: tuple[Route, ...] = (),
    metrics: GatewayMetrics | None = None,
) -> Starlette:
    """Build the ASGI app. ``services`` (opened by the caller, who also closes them) and
    ``upstreams`` (provider name -> adapter) override the defaults, for tests;
    ``metrics`` defaults to this process's own registry."""

    @contextlib.asynccontextmanager
    async def lifespan(app: GatewayApp) -> AsyncIterator[None]:
        svc = services if services is not None else await _open_services(settings)
        connections = Connections(settings.env)
        # TLS contexts read CA bundles from disk: built once, off the loop, before serving.
        await asyncio.to_thread(connections.prepare, settings.models)
        # Large bodies' parsing and re-encoding, shared by the endpoints and the upstreams.
        offload = Offload(settings.body_offload_bytes, settings.body_offload_workers)
        client = UpstreamHttp(
            connections,
            keepalive_s=settings.upstream_keepalive_s,
            max_event_bytes=settings.stream_event_cap,
            max_stream_bytes=settings.stream_cap,
            offload=offload,
        )
        registry = UpstreamRegistry.build(settings, client, upstreams).wrapped(ops.meter_upstream)
        app.state.services = app.services = svc
        app.state.service = app.service = ChatService(
            settings, registry, ops.meter_limiter(svc.limiter), offload=offload
        )
        ops.bind(svc, app.state.service.lint_cache, offload)
        draining.install()  # waiting requests give up at once on SIGTERM
        try:
            yield
        finally:
            draining.uninstall()
            try:
                await registry.aclose()
                await client.aclose()
                await asyncio.to_thread(offload.close)  # a job still running ends first
            finally:
                try:
                    if services is None:
                        await svc.aclose()
                finally:
                    await ops.aclose()

    def ledger() -> Ledger | None:
        svc = app.services
        return svc.ledger if svc is not None else None

    def keys() -> KeyStore:
        svc = app.services
        if svc is None:
            svc = app.state.services  # none opened: app.state's AttributeError
        return svc.keys

    ops = Ops(settings, metrics, route_paths=metric_paths())
    draining = Draining()
    routes = [*starlette_routes(), *extra_routes]  # every route: gateway.routes.table
    app = GatewayApp(
        routes=routes,
        middleware=[
            Middleware(
                GatewayMiddleware,
                max_body_bytes=settings.max_body_bytes,
                ledger=ledger,
                observer=ops.observer,
                limits=EdgeLimits.from_settings(settings),  # in-flight cap, deadlines
            ),
            Middleware(AuthMiddleware, keys=keys),
            # after auth: idempotency keys are scoped to the caller's principal
            Middleware(
                IdempotencyMiddleware,
                settings=settings,
                draining=draining,
                paths=idempotent_paths(),
            ),
            Middleware(AdminAuthMiddleware, keys=keys),
        ],
        exception_handlers={HTTPException: http_exception},
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.ops = ops
    return app


def create_app_from_env() -> Starlette:
    """Factory for ``uvicorn --factory`` / multi-worker serving: config from ``SYNTIC_CONFIG``.
    Each worker process configures its own logging (``SYNTIC_LOG_LEVEL``, set by serve)
    and, once its app is built, freezes its startup heap as a single ``syntic serve`` does."""
    env = os.environ
    configure_logging(env.get("SYNTIC_LOG_LEVEL", "info"), log_format_from_env(env))
    # syntic serve --workers N sets the directory: /metrics then merges every worker's.
    metrics = GatewayMetrics.create(multiprocess_dir=env.get(multiprocess.ENV))
    app = create_app(load_settings(), metrics=metrics)
    freeze_startup_heap()
    return app
