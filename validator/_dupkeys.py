"""Duplicate object keys in JSON text: ``{"a": "x", "a": 1}``.

Parsers disagree on which member wins (orjson and the stdlib keep the last, others the
first or refuse), so a value with a duplicate key means different things to different
readers and is never valid for a strict schema.

The common case costs C-speed work only: the parsed value is serialized again with
orjson, and the colons of both texts are counted. Each key in a text has its colon and
every colon inside a string is written as is, so the re-serialized text has as many
colons as the original exactly when no member was lost (an escaped colon, ``\\u003a``,
is one more in the re-serialized text: such text takes the slow path). A lost member
means one colon fewer; only then is the text parsed again, keeping every member, to name
the key.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["duplicate_key"]


def duplicate_key(raw: bytes | str, parsed: Any) -> tuple[list[str | int], str] | None:
    """``(path of the object, key)`` of the first duplicate key in ``raw`` (which parses to
    ``parsed``), or ``None``."""
    if isinstance(raw, bytes):
        colons = raw.count(b":")
        escaped = b"\\u003" in raw
    else:
        colons = raw.count(":")
        escaped = "\\u003" in raw
    if colons == 0:
        return None
    try:
        again = orjson.dumps(parsed).count(b":")
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return _find(raw)
    if again == colons and not escaped:
        return None
    return _find(raw)


class _Pairs(list[tuple[str, Any]]):
    """An object as the list of its members, duplicates kept."""


def _find(raw: bytes | str) -> tuple[list[str | int], str] | None:
    try:
        tree = json.loads(raw, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):  # orjson parsed it; no second opinion to give
        return None
    stack: list[tuple[Any, list[str | int]]] = [(tree, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            for key, _ in node:
                if key in seen:
                    return path, key
                seen.add(key)
            stack.extend((v, [*path, k]) for k, v in reversed(node))
        elif isinstance(node, list):
            stack.extend((v, [*path, i]) for i, v in reversed(list(enumerate(node))))
    return None
