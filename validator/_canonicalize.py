"""The inverse of the strict projection on payloads (prior-art-*.md).

``canonicalize(payload, original)`` removes a ``null`` member exactly where the projection
made an optional property nullable, i.e. the property is not required by the original and
its original schema does not accept null. Everything else is returned as is (unchanged
subtrees keep their identity). Inside ``anyOf``/``oneOf`` the branch is picked structurally:
an object branch whose properties are exactly the payload's keys (a projected payload
carries every property) wins, else the first branch whose type and declared keys fit. Two
object branches with the same property names but different nested optionals are the one
ambiguous case; the first is followed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["accepts_null", "canonicalize"]

_MAX_DEPTH = 64


def accepts_null(schema: Any, root: Any, depth: int = 0) -> bool:
    """Whether ``null`` is valid against ``schema`` (refs resolved against ``root``)."""
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return False
    t = schema.get("type")
    if t is not None and not (t == "null" or (isinstance(t, list) and "null" in t)):
        return False
    if "enum" in schema and (not isinstance(schema["enum"], list) or None not in schema["enum"]):
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            hits = sum(accepts_null(b, root, depth + 1) for b in branches)
            if hits == 0 or (key == "oneOf" and hits != 1):
                return False
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and not all(accepts_null(b, root, depth + 1) for b in all_of):
        return False
    if "not" in schema and accepts_null(schema["not"], root, depth + 1):
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str) and root is not None:
        return accepts_null(_resolve(ref, root), root, depth + 1)
    return True


def _resolve(ref: str, root: Any) -> Any:
    if not ref.startswith("#"):
        return None
    node = root
    for raw in ref[1:].split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def canonicalize(payload: Any, original_schema: Any) -> Any:
    """Invert the projection on a payload: drop ``null`` members the original would not accept.

    >>> schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    >>> canonicalize({"note": None}, schema)
    {}
    """
    return _canon(payload, original_schema, original_schema, 0)


def _canon(value: Any, schema: Any, root: Any, depth: int) -> Any:
    schema = _deref(schema, root)
    if depth > 4 * _MAX_DEPTH or not isinstance(schema, Mapping):
        return value
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            branch = _pick(value, branches, root)
            return value if branch is None else _canon(value, branch, root, depth + 1)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return _canon(value, all_of[0], root, depth + 1)
    if isinstance(value, dict):
        return _canon_object(value, schema, root, depth)
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return value
        new = [_canon(v, items, root, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(new, value, strict=True)) else new
    return value


def _canon_object(value: dict[str, Any], schema: Mapping[str, Any], root: Any, depth: int) -> Any:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return value
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    out: dict[str, Any] = {}
    changed = False
    for key, member in value.items():
        sub = props.get(key)
        if sub is None:
            out[key] = member
            continue
        if member is None and key not in required and not accepts_null(sub, root):
            changed = True
            continue
        new = _canon(member, sub, root, depth + 1)
        changed = changed or new is not member
        out[key] = new
    return out if changed else value


def _deref(schema: Any, root: Any) -> Any:
    seen = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and seen < 32:
        target = _resolve(schema["$ref"], root)
        if target is None:
            return schema
        schema = target
        seen += 1
    return schema


def _pick(value: Any, branches: list[Any], root: Any) -> Any:
    """The branch a projected payload came from: an object whose keys are exactly the
    branch's properties (projected objects carry every property) wins, else the first
    branch the value fits structurally."""
    fitting = [b for b in branches if _fits(value, _deref(b, root))]
    if isinstance(value, dict):
        for branch in fitting:
            target = _deref(branch, root)
            props = target.get("properties") if isinstance(target, Mapping) else None
            if isinstance(props, Mapping) and set(props) == set(value):
                return branch
    return fitting[0] if fitting else None


def _fits(value: Any, schema: Any) -> bool:
    """A structural match for picking an ``anyOf`` branch: type, then declared keys."""
    if not isinstance(schema, Mapping):
        return schema is not False
    if "const" in schema:
        return bool(schema["const"] == value)
    if isinstance(schema.get("enum"), list):
        return value in schema["enum"]
    t = schema.get("type")
    types = [t] if isinstance(t, str) else t if isinstance(t, list) else None
    if types is not None and not any(_is_type(value, x) for x in types):
        return False
    props = schema.get("properties")
    if isinstance(value, dict) and isinstance(props, Mapping):
        if not set(value) <= set(props):  # the projection closed every object
            return False
        required = schema.get("required")
        if isinstance(required, list) and any(r not in value for r in required):
            return False
    return True


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    return name == "object" and isinstance(value, dict)
