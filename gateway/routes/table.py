"""Every route the gateway serves, declared once.

A route's path, methods and endpoint live here with the jobs other parts of the app
attach to it: whether ``Idempotency-Key`` is honoured and whether it has a label of its
own in ``syntic_requests_total``. ``create_app`` derives the router's routes, the
idempotency paths and the metric labels from ``ROUTES``; a test ties the OpenAPI
document and the README's endpoint table to it.

Adding a route: one ``RouteSpec`` line below, its OpenAPI entry, its README row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.admin.api import (
    create_key,
    list_keys,
    requests_list,
    revoke_key,
    usage,
)
from gateway.admin.console import console_asset, console_index
from gateway.dialects.anthropic.count_tokens import count_tokens
from gateway.dialects.anthropic.endpoint import messages
from gateway.dialects.openai import chat_completions
from gateway.dialects.responses import create_response, response_by_id
from gateway.routes.health import healthz, metrics, readyz
from gateway.routes.models import list_models
from gateway.routes.openapi import openapi_json
from gateway.routes.schema_check import schemas_check

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One route and what the app attaches to it."""

    path: str
    methods: tuple[str, ...]
    endpoint: Endpoint
    idempotent: bool = False  # a POST that honours Idempotency-Key (a model call)
    labelled: bool = True  # its own label in syntic_requests_total (else "other")

    @property
    def templated(self) -> bool:
        return "{" in self.path


# The chat routes first: the router tries routes in order.
ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec("/v1/chat/completions", ("POST",), chat_completions, idempotent=True),
    RouteSpec("/v1/messages", ("POST",), messages, idempotent=True),
    RouteSpec("/v1/messages/count_tokens", ("POST",), count_tokens, idempotent=True),
    RouteSpec("/v1/responses", ("POST",), create_response, idempotent=True),
    RouteSpec("/v1/responses/{response_id}", ("GET", "DELETE"), response_by_id),
    # Operational routes, no auth.
    RouteSpec("/healthz", ("GET",), healthz),
    RouteSpec("/readyz", ("GET",), readyz),
    RouteSpec("/metrics", ("GET",), metrics),
    RouteSpec("/openapi.json", ("GET",), openapi_json),
    RouteSpec("/v1/models", ("GET",), list_models),
    RouteSpec("/v1/schemas/check", ("POST",), schemas_check),
    # Admin keys only (AdminAuthMiddleware).
    RouteSpec("/admin/keys", ("POST",), create_key),
    RouteSpec("/admin/keys", ("GET",), list_keys),
    RouteSpec("/admin/keys/{key_id}", ("DELETE",), revoke_key),
    RouteSpec("/admin/usage", ("GET",), usage),
    RouteSpec("/admin/requests", ("GET",), requests_list),
    RouteSpec("/admin/schemas/check", ("POST",), schemas_check),  # the same check, admin auth
    # The console: static, no data.
    RouteSpec("/console", ("GET",), console_index),
    RouteSpec("/console/{asset}", ("GET",), console_asset),
)


def starlette_routes(specs: Iterable[RouteSpec] = ROUTES) -> list[Route]:
    return [Route(s.path, s.endpoint, methods=list(s.methods)) for s in specs]


def idempotent_paths(specs: Iterable[RouteSpec] = ROUTES) -> frozenset[str]:
    return frozenset(s.path for s in specs if s.idempotent)


def metric_paths(specs: Iterable[RouteSpec] = ROUTES) -> frozenset[str]:
    """Exact paths with a label of their own (a templated path's label would be unbounded)."""
    return frozenset(s.path for s in specs if s.labelled and not s.templated)
