"""What the app answers when no route takes a request as it came: Starlette's router
decides, this module shapes the answer.

- ``http_exception``: the router's 404 and 405 in the unified envelope. A 405 carries
  ``Allow`` with every method the path's routes take (RFC 9110, 15.5.6); Starlette's own
  names only the first route it found for the path (``/admin/keys`` has two).
- ``SlashRedirect``: the router's fallback. A path that matches a route only with or
  without its trailing slash gets a 307 to that path with a relative ``Location``: path
  and query only. Starlette's own redirect builds an absolute URL from the ``Host``
  header, which the client chooses: an open redirect on the gateway's origin.

Example::

    app = Starlette(routes=..., exception_handlers={HTTPException: http_exception})
    SlashRedirect.install(app.router)
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Match, Router
from starlette.types import Receive, Scope, Send

from gateway.errors import GatewayError, NotFound, dialect_of
from gateway.web import error_body, request_context


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> list[str]:
    """Every method some route takes for ``scope``'s path, sorted."""
    methods: set[str] = set()
    for route in routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (unknown route, wrong method) as the unified envelope."""
    assert isinstance(exc, HTTPException)
    ctx = request_context(request.scope)
    headers: dict[str, str] = {}
    if exc.status_code == 404:
        err: GatewayError = NotFound(f"No route for {request.method} {request.url.path}.")
    else:
        router = request.scope.get("router")
        allow = allowed_methods(router.routes if isinstance(router, Router) else (), request.scope)
        headers["allow"] = ", ".join(allow)
        err = GatewayError(
            f"{request.method} is not allowed on {request.url.path}; allowed: {', '.join(allow)}.",
            code="method_not_allowed",
        )
        err.status = exc.status_code
    ctx.error_code = err.code
    return Response(
        error_body(err, ctx.request_id, dialect_of(ctx.endpoint)),
        status_code=err.status,
        media_type="application/json",
        headers={**err.response_headers(), **headers},
    )


class SlashRedirect:
    """The router's fallback: a relative 307 to the path's slash twin when a route takes
    that, else the router's 404."""

    def __init__(self, router: Router) -> None:
        self.router = router

    @classmethod
    def install(cls, router: Router) -> None:
        """Replace ``router``'s own trailing-slash redirect with this one."""
        router.redirect_slashes = False
        router.default = cls(router)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        location = self.location(scope) if scope["type"] == "http" else None
        if location is None:
            await self.router.not_found(scope, receive, send)
            return
        await RedirectResponse(location)(scope, receive, send)

    def location(self, scope: Scope) -> str | None:
        """``scope``'s path with its trailing slash toggled, and its query, if a route
        takes that path; None otherwise."""
        path: str = scope["path"]
        if path == "/" or path == scope.get("root_path", "") + "/":
            return None
        twin = path.rstrip("/") if path.endswith("/") else path + "/"
        # "//host" or "/\host" would be read by browsers as another origin.
        if twin.startswith(("//", "/\\")):
            return None
        twin_scope = {**scope, "path": twin}
        if not any(r.matches(twin_scope)[0] is not Match.NONE for r in self.router.routes):
            return None
        query: bytes = scope.get("query_string", b"")
        return twin + "?" + query.decode("latin-1") if query else twin
