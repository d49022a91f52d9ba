"""Every use of a framework's private API, in one place, with the versions it assumes.

The gateway relies on a few things uvicorn does not promise: ``EdgeProtocol``
(``gateway.server.protocol``) subclasses its ``HttpToolsProtocol`` and relies on its
parser callbacks (``on_message_begin``, ``on_url``, ``on_header``, ``on_headers_complete``,
``on_message_complete``) and on ``parser``, ``headers``, ``cycle``, ``transport``,
``loop``, ``logger``, ``timeout_keep_alive``, ``_unset_keepalive_if_required``,
``_should_upgrade`` and ``send_400_response`` keeping their names and jobs. Starlette is
used through its public API only; a private use of it would go here too, with its range
in ``ASSUMED``.

``tests/server/test_compat.py`` fails with the installed and the assumed versions when
uvicorn is outside ``ASSUMED``: check the uses above against the new version, then widen
the range.
"""

from __future__ import annotations

import importlib.metadata

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

# distribution -> (lowest assumed, first not assumed): the range checked against the uses
ASSUMED: dict[str, tuple[str, str]] = {
    "uvicorn": ("0.54.0", "0.56"),
}

__all__ = [
    "ASSUMED",
    "Config",
    "HttpToolsProtocol",
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
