"""Admin-key authentication for every ``/admin/*`` route.

Runs as middleware, before routing, so an unknown ``/admin/...`` path also answers 401/403
rather than revealing which routes exist. Only keys created with
``syntic keys create --admin`` (``sk_admin_...``, ``admin`` set in the key store) pass:

- no key: 401 ``missing_api_key``;
- malformed, unknown or revoked key: 401 ``invalid_api_key``;
- a valid customer key (``sk_live_`` / ``sk_test_``): 403 ``permission_denied``.

All three go through the outer middleware as the unified error envelope. The principal is
put on the request context (so the request log line names the admin key id); the secret is
never kept. The console's static files (``/console``) need no key: they hold no data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import AuthenticationError, PermissionDenied
from gateway.keys.base import KeyStore
from gateway.middleware.auth import presented_key
from gateway.web import request_context

ADMIN_PREFIX = "/admin"


def is_admin_path(path: str) -> bool:
    """``/admin`` itself and everything below it (not ``/administrator``)."""
    return path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")


class AdminAuthMiddleware:
    """Requires an admin key on ``/admin`` and below; other paths pass through."""

    def __init__(self, app: ASGIApp, *, keys: Callable[[], KeyStore]) -> None:
        self.app = app
        self.keys = keys

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine itself: other paths get the inner app's awaitable directly.
        if scope["type"] == "http" and is_admin_path(scope["path"]):
            return self._admin(scope, receive, send)
        return self.app(scope, receive, send)

    async def _admin(self, scope: Scope, receive: Receive, send: Send) -> None:
        secret = presented_key(scope.get("headers", ()))
        if secret is None:
            raise AuthenticationError(
                "Missing admin key. Send 'Authorization: Bearer sk_admin_...'.",
                code="missing_api_key",
            )
        principal = await self.keys().authenticate(secret)
        if principal is None:
            raise AuthenticationError("Invalid or revoked API key.")
        request_context(scope).principal = principal
        if not principal.admin:
            raise PermissionDenied(
                "The admin API needs an admin key (sk_admin_..., created with "
                "'syntic keys create --admin'); customer keys cannot use it."
            )
        await self.app(scope, receive, send)
