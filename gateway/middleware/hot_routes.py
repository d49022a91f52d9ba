"""Direct dispatch of the hot routes, innermost of the app's middleware.

Starlette's path from the middleware stack to an endpoint (exception middleware, router
matching every route in turn, the route's request/response wrapper and its exception
handler) costs more per request than the chat endpoint's own bookkeeping. ``HotRoutes``
sends ``POST`` to an exact hot path straight to its endpoint; everything else (other
methods, 404/405, every other route) goes through the router as before. The endpoints are
unchanged: they still take a ``Request`` and return a ``Response``. Errors propagate to
``GatewayMiddleware`` exactly as they do through the router (the endpoints raise
``GatewayError``, never Starlette's ``HTTPException``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

Endpoint = Callable[[Request], Awaitable[Response]]


class HotRoutes:
    """Pure-ASGI middleware: ``POST <path>`` in ``routes`` -> that endpoint, directly."""

    def __init__(self, app: ASGIApp, *, routes: Mapping[str, Endpoint]) -> None:
        self.app = app
        self.routes = dict(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self.routes.get(scope["path"])
            if endpoint is not None:
                response = await endpoint(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
