"""The vendor request headers a client's request carries to a same-wire upstream
(``ChatRequest.origin.headers``): Anthropic's beta flags and API version, OpenAI's beta
flags. Each is read once per request, its repeated lines joined with ``", "``."""

from __future__ import annotations

from collections.abc import Collection
from operator import itemgetter

from gateway.canonical import Header
from gateway.errors import InvalidRequest

VENDOR_HEADERS: tuple[str, ...] = ("anthropic-beta", "anthropic-version", "openai-beta")
_RAW = {name.encode(): name for name in VENDOR_HEADERS}


def vendor_headers(raw: Collection[tuple[bytes, bytes]]) -> tuple[Header, ...]:
    """The vendor headers among an ASGI scope's ``headers`` (lower-case names), in
    ``VENDOR_HEADERS`` order; 400 for a value with a control character (it would go into
    an upstream request's head)."""
    if _RAW.keys().isdisjoint(map(itemgetter(0), raw)):
        return ()  # the common request: none of them, found in one C pass
    found: dict[str, list[str]] = {}
    for key, value in raw:
        name = _RAW.get(key)
        if name is None:
            continue
        text = value.decode("latin-1")
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text):
            raise InvalidRequest(f"The {name} header contains a control character.", param=name)
        found.setdefault(name, []).append(text)
    if not found:
        return ()
    return tuple((name, ", ".join(found[name])) for name in VENDOR_HEADERS if name in found)
