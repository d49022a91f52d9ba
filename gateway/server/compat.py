"""Every use of a framework's private API, in one place, with the versions it assumes.

The gateway relies on a few things uvicorn and Starlette do not promise:

- uvicorn: ``EdgeProtocol`` (``gateway.server.protocol``) subclasses its
  ``HttpToolsProtocol`` and relies on its parser callbacks (``on_message_begin``,
  ``on_url``, ``on_header``, ``on_headers_complete``, ``on_message_complete``) and on
  ``parser``, ``headers``, ``cycle``, ``transport``, ``loop``, ``logger``,
  ``timeout_keep_alive``, ``_unset_keepalive_if_required``, ``_should_upgrade`` and
  ``send_400_response`` keeping their names and jobs.
- Starlette: ``AppState`` keeps ``State._state`` in step with plain attributes;
  ``LeanStarlette`` drops the ``ServerErrorMiddleware`` that ``build_middleware_stack``
  puts outermost; ``BareResponse`` stores a response's ready parts without
  ``Response.__init__`` (``Response.__call__`` reads only ``status_code``,
  ``raw_headers``, ``body`` and ``background``).

``tests/server/test_compat.py`` fails with the installed and the assumed versions when
uvicorn or Starlette is outside ``ASSUMED``: check the uses above against the new
version, then widen the range.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import State
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

# distribution -> (lowest assumed, first not assumed): the range checked against the uses
ASSUMED: dict[str, tuple[str, str]] = {
    "uvicorn": ("0.54.0", "0.55"),
    "starlette": ("1.10.0", "2.0"),
}

__all__ = [
    "ASSUMED",
    "AppState",
    "BareResponse",
    "Config",
    "HttpToolsProtocol",
    "LeanStarlette",
    "ServerState",
    "version_problems",
]


def _release(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string (``"0.54.0rc1"`` -> ``(0, 54, 0)``)."""
    parts: list[int] = []
    for piece in version.split("."):
        digits = ""
        for char in piece:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) < len(piece):
            break
    return tuple(parts)


def version_problems(installed: dict[str, str] | None = None) -> list[str]:
    """One line per framework whose installed version is outside ``ASSUMED``."""
    problems = []
    for name, (lowest, first_not) in ASSUMED.items():
        version = (installed or {}).get(name) or importlib.metadata.version(name)
        if not _release(lowest) <= _release(version) < _release(first_not):
            problems.append(
                f"{name} {version} is installed, but gateway.server.compat assumes "
                f"{name}>={lowest},<{first_not}: check its private-API uses against "
                f"{name} {version}, then update ASSUMED"
            )
    return problems


class AppState(State):
    """Starlette's ``State`` whose values are plain instance attributes as well.

    ``State`` keeps them in a dict behind ``__getattr__``, which Python calls only after
    the normal lookup has failed: every read built and discarded an ``AttributeError``
    and made a Python call. Values set here are found by the normal lookup; ``_state``
    stays in step for anything that reads it."""

    def __setattr__(self, key: Any, value: Any) -> None:
        object.__setattr__(self, key, value)
        self._state[key] = value

    def __delattr__(self, key: Any) -> None:
        object.__delattr__(self, key)
        del self._state[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.__setattr__(key, value)

    def __delitem__(self, key: str) -> None:
        self.__delattr__(key)


class LeanStarlette(Starlette):
    """Starlette without its outermost ``ServerErrorMiddleware`` (one wrapper frame and one
    ``send`` wrapper per request fewer), for an app whose own outer middleware turns every
    exception into a response; its ``state`` is an ``AppState``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = AppState()

    def build_middleware_stack(self) -> ASGIApp:
        app = super().build_middleware_stack()
        return app.app if isinstance(app, ServerErrorMiddleware) else app


class BareResponse(Response):
    """A ``Response`` of ready parts: ``__init__`` stores them and renders nothing."""

    def __init__(
        self, body: bytes, raw_headers: list[tuple[bytes, bytes]], status_code: int = 200
    ) -> None:
        self.status_code = status_code
        self.background = None
        self.body = body
        self.raw_headers = raw_headers
