"""API-key authentication for every ``/v1/*`` route.

Accepts ``Authorization: Bearer <key>`` (the openai SDK) and ``x-api-key: <key>`` (the
anthropic SDK). A missing, malformed, unknown or revoked key raises
``AuthenticationError`` (401 envelope via the outer middleware); an admin key
(``sk_admin_``) is refused with ``PermissionDenied`` (403). The principal is stored
on the request context; the secret itself is never kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import AuthenticationError, PermissionDenied
from gateway.keys.base import KeyStore, Principal
from gateway.web import request_context


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The API key from ``Authorization: Bearer`` or ``x-api-key``, or None."""
    api_key: str | None = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            if token and scheme.lower() == "bearer":
                return token
        elif name == b"x-api-key" and value.strip():
            api_key = value.decode("latin-1").strip()
    return api_key


class AuthMiddleware:
    """Authenticates ``/v1/*``; other paths (health checks) pass through."""

    def __init__(self, app: ASGIApp, *, keys: Callable[[], KeyStore]) -> None:
        self.app = app
        self.keys = keys

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine itself when the key store answers from memory (nearly every
        # request): the inner app's awaitable is returned, one coroutine frame fewer on
        # every suspension of the request. Errors raise here, inside the caller's
        # ``await``, as they would from a coroutine.
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            secret = presented_key(scope.get("headers", ()))
            if secret is None:
                raise AuthenticationError(
                    "Missing API key. Send 'Authorization: Bearer sk_live_...'.",
                    code="missing_api_key",
                )
            known, principal = self.keys().cached(secret)
            if not known:
                return self._looked_up(scope, receive, send, secret)
            _admit(scope, principal)
        return self.app(scope, receive, send)

    async def _looked_up(self, scope: Scope, receive: Receive, send: Send, secret: str) -> None:
        _admit(scope, await self.keys().authenticate(secret))
        await self.app(scope, receive, send)


def _admit(scope: Scope, principal: Principal | None) -> None:
    if principal is None:
        raise AuthenticationError("Invalid or revoked API key.")
    if principal.admin:
        # Least privilege: admin keys open /admin/* only.
        raise PermissionDenied(
            "Admin keys cannot call /v1 routes; use a customer key (sk_live_/sk_test_)."
        )
    request_context(scope).principal = principal
