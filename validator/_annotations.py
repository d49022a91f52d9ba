"""The provider copy of a schema: annotations dropped, nothing else changed.

Annotations (``default``, ``examples``, ``$comment``, ...) never constrain a value, and
providers' strict modes refuse some of them, so the copy an upstream gets leaves them out
while the client's schema (the one validated) keeps them. Keyword-driven: a property named
``default`` is a property. ``description`` and ``title`` stay (every strict mode takes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from validator._lint import FREE_ANNOTATIONS

__all__ = ["without_annotations"]

_DROP = FREE_ANNOTATIONS | {"$schema"}
_SCHEMA_MAPS = ("properties", "$defs")  # name -> schema
_SCHEMA_LISTS = ("anyOf",)
_SCHEMA_VALUES = ("items", "additionalProperties")
_MAX_DEPTH = 128
_DROPPED: Any = object()  # marks a member left out of the copy


def without_annotations(schema: Any) -> Any:
    """``schema`` without annotation keywords; the very same object when it has none.

    >>> without_annotations({"type": "integer", "default": 10})
    {'type': 'integer'}
    """
    return _strip(schema, 0)


def _strip(node: Any, depth: int) -> Any:
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return node
    out: dict[str, Any] | None = None
    for key, value in node.items():
        new = value
        if key in _DROP:
            new = _DROPPED
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            new = _strip_map(value, depth)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            stripped = [_strip(v, depth + 1) for v in value]
            if any(a is not b for a, b in zip(stripped, value, strict=True)):
                new = stripped
        elif key in _SCHEMA_VALUES:
            new = _strip(value, depth + 1)
        if new is not value and out is None:
            out = {}
            for k, v in node.items():  # the keys before this one, unchanged
                if k == key:
                    break
                out[k] = v
        if out is not None and new is not _DROPPED:
            out[key] = new
    return node if out is None else out


def _strip_map(value: Mapping[str, Any], depth: int) -> Any:
    stripped = {k: _strip(v, depth + 1) for k, v in value.items()}
    if all(stripped[k] is v for k, v in value.items()):
        return value
    return stripped
