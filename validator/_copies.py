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

__all__ = ["anthropic_copy", "openai_copy"]

_OPENAI_FORMATS = DIALECT_FORMATS["openai"]
_ANTHROPIC_FORMATS = DIALECT_FORMATS["anthropic"]
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


def anthropic_copy(schema: Any) -> Any:
    """``schema`` as anthropic-python's ``transform_schema`` makes it for Anthropic's strict
    mode: a new schema with only what that mode takes (``type``, ``enum``/``const`` of
    primitives, ``anyOf``/``allOf`` with ``oneOf`` sent as ``anyOf``, ``$ref``/``$defs``,
    ``properties``/``required`` with ``additionalProperties: false`` on every object,
    ``items``, ``minItems`` 0 or 1, the formats it lists, ``description``, ``title``);
    every other keyword moves into the description, in the SDK's words
    (``{minimum: 1, maxLength: 5}``). ``$ref`` keeps nothing beside it, and a ``type``
    beside ``enum``/``const`` goes, as in the SDK.

    Two deliberate differences, where the SDK breaks the schema: draft-07's
    ``definitions`` is kept (and its schemas transformed) like ``$defs``, where the SDK
    moves it into the description and leaves its ``$ref`` dangling; and a list of types
    (``["string", "null"]``), which the SDK refuses with an ``AssertionError``, keeps what
    each of its types keeps. Never raises; a non-object subschema is returned as it is.

    >>> anthropic_copy({"type": "integer", "minimum": 1, "description": "A count"})
    {'type': 'integer', 'description': 'A count\n\n{minimum: 1}'}
    """
    return _anthropic(schema, 0)


def _primitive(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _anthropic(node: Any, depth: int) -> Any:
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return node
    rest = dict(node)
    out: dict[str, Any] = {}
    for defs_key in ("$defs", "definitions"):
        defs = rest.pop(defs_key, None)
        if isinstance(defs, Mapping):
            out[defs_key] = {k: _anthropic(v, depth + 1) for k, v in defs.items()}
        elif defs is not None:
            rest[defs_key] = defs
    if "$ref" in rest:
        out["$ref"] = rest["$ref"]
        return out
    type_ = rest.pop("type", None)
    any_of = rest.pop("anyOf", None)
    one_of = rest.pop("oneOf", None)
    all_of = rest.pop("allOf", None)
    enum = rest.get("enum")
    if isinstance(enum, list) and enum and all(_primitive(v) for v in enum):
        out["enum"] = list(rest.pop("enum"))
    if "const" in rest and _primitive(rest["const"]):
        out["const"] = rest.pop("const")
    literals = "enum" in out or "const" in out
    if literals:
        type_ = None
    if isinstance(any_of, list):
        out["anyOf"] = [_anthropic(v, depth + 1) for v in any_of]
    elif isinstance(one_of, list):
        out["anyOf"] = [_anthropic(v, depth + 1) for v in one_of]
    elif isinstance(all_of, list):
        out["allOf"] = [_anthropic(v, depth + 1) for v in all_of]
    elif not literals and type_ is not None:
        out["type"] = type_
    if "description" in rest:
        out["description"] = rest.pop("description")
    if "title" in rest:
        out["title"] = rest.pop("title")
    types = set(type_) if isinstance(type_, list) else {type_}
    if "object" in types:
        props = rest.pop("properties", {})
        out["properties"] = (
            {k: _anthropic(v, depth + 1) for k, v in props.items()}
            if isinstance(props, Mapping)
            else props
        )
        rest.pop("additionalProperties", None)
        out["additionalProperties"] = False
        required = rest.pop("required", None)
        if required is not None:
            out["required"] = list(required) if isinstance(required, list) else required
    if "string" in types:
        fmt = rest.pop("format", None)
        if fmt and isinstance(fmt, str) and fmt in _ANTHROPIC_FORMATS:
            out["format"] = fmt
        elif fmt:
            rest["format"] = fmt  # described below, after the others (as the SDK orders it)
    if "array" in types:
        items = rest.pop("items", None)
        if items is not None:
            out["items"] = _anthropic(items, depth + 1)
        min_items = rest.pop("minItems", None)
        if (min_items is not None and min_items == 0) or min_items == 1:
            out["minItems"] = min_items
        elif min_items is not None:
            rest["minItems"] = min_items
    if rest:
        _describe_anthropic(out, rest)
    return out


def _describe_anthropic(out: dict[str, Any], moved: Mapping[str, Any]) -> None:
    # The SDK's own words: ``str()`` of each value (Python reprs inside containers).
    note = "{" + ", ".join(f"{key}: {value}" for key, value in moved.items()) + "}"
    description = out.get("description")
    out["description"] = (f"{description}\n\n" if description is not None else "") + note
