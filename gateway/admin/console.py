"""The operator console: static files under ``/console``.

Plain HTML, CSS and JavaScript shipped in the package (``gateway/static/console/``), no
build step, no framework. The page holds no data and no secrets; everything it shows comes
from the admin API, called with the admin key the operator pastes (kept in
``sessionStorage`` only, sent as a bearer header). So these routes need no key.

Every response carries a strict Content-Security-Policy: scripts, styles and fetches from
this origin only, no inline script or style, no framing, no forms posting elsewhere.

    GET /console               index.html
    GET /console/{asset}       app.js, charts.js, ... (only files shipped in the package)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import NotFound

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-cache",
}
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True, slots=True)
class Asset:
    """One shipped file, read once."""

    body: bytes
    media_type: str


@cache
def console_assets() -> dict[str, Asset]:
    """Every servable file in ``gateway/static/console`` by name (read once per process)."""
    root = resources.files("gateway") / "static" / "console"
    found: dict[str, Asset] = {}
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in _TYPES:
            found[entry.name] = Asset(entry.read_bytes(), _TYPES[suffix])
    return found


def _serve(name: str) -> Response:
    asset = console_assets().get(name)
    if asset is None:
        raise NotFound(f"No console file {name!r}.")
    return Response(asset.body, media_type=asset.media_type, headers=SECURITY_HEADERS)


async def console_index(request: Request) -> Response:
    """``GET /console``: the single page."""
    return _serve("index.html")


async def console_asset(request: Request) -> Response:
    """``GET /console/{asset}``: a shipped script, stylesheet or icon."""
    return _serve(request.path_params["asset"])
