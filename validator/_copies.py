"""Vendor copies of a strict schema: what a vendor's strict mode accepts, the rest named in
descriptions (``{format: uri}``), as the vendors' own SDKs do.

The copy is for the vendor's constrained decoding only: answers are still validated
against the schema it was made from, where every moved keyword is checked. Both copies are
keyword-driven (a property named ``format`` is a property) and never change their input.

* ``openai_copy``: a ``format`` OpenAI's strict mode lacks (``uri``) moves into the
  description; the very same object comes back when nothing moves.
* ``anthropic_copy``: ``transform_schema`` of anthropic-python (``anthropic.lib._parse.
  _transform``), keyword for keyword; see its docstring for the two deliberate differences.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from validator._lint import DIALECT_FORMATS

__all__ = ["openai_copy"]

_OPENAI_FORMATS = DIALECT_FORMATS["openai"]
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf")
_SCHEMA_VALUES = ("items", "additionalProperties")
_MAX_DEPTH = 128


def describe(node: dict[str, Any], moved: Mapping[str, Any]) -> None:
    """Append ``{key: value, ...}`` for ``moved`` to ``node``'s description (SDK style:
    Python's ``str`` of each value, after a blank line)."""
    if not moved:
        return
    note = "{" + ", ".join(f"{key}: {value}" for key, value in moved.items()) + "}"
    description = node.get("description")
    node["description"] = f"{description}\n\n{note}" if isinstance(description, str) else note


def openai_copy(schema: Any) -> Any:
    """``schema`` as OpenAI's strict mode takes it: a ``format`` it lacks moved into the
    description. The same object when nothing moves.

    >>> openai_copy({"type": "string", "format": "uri"})
    {'type': 'string', 'description': '{format: uri}'}
    """
    return _openai(schema, 0)


def _openai(node: Any, depth: int) -> Any:
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return node
    out: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    changed = False
    for key, value in node.items():
        new = value
        if key == "format" and isinstance(value, str) and value not in _OPENAI_FORMATS:
            moved[key] = value
            changed = True
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            children = {k: _openai(v, depth + 1) for k, v in value.items()}
            if any(children[k] is not v for k, v in value.items()):
                new = children
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            items = [_openai(v, depth + 1) for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                new = items
        elif key in _SCHEMA_VALUES:
            new = _openai(value, depth + 1)
        changed = changed or new is not value
        out[key] = new
    if not changed:
        return node
    describe(out, moved)
    return out
