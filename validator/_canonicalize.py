"""The inverse of the strict projection on payloads (prior-art-*.md).

``canonicalize(payload, original)`` removes a ``null`` member exactly where the projection
made an optional property nullable, i.e. the property is not required by the original and
its original schema does not accept null. Everything else is returned as is (unchanged
subtrees keep their identity).

Inside ``anyOf``/``oneOf`` the branch is the one the original schema accepts the answer
under: branches whose type, keys or discriminator (a property's ``const``/``enum``, e.g.
pydantic's ``kind: "dog"``) rule the value out are dropped, then each remaining branch is
tried: the payload canonicalized under it and validated against that branch of the
original (by the validator's own engine), and the first that holds wins. When the engine
cannot build the original (a keyword outside its subset), the structural choice stands:
an object branch whose properties are exactly the payload's keys, else the first fit.

Last, the whole result is validated against the original: if it fails there while the
payload as sent holds, the payload is returned unchanged, so an answer the original
accepts always comes back accepted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from validator._interp import Interpreter
from validator._ir import BuildError, build_located
from validator._jsonvalue import json_equal

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
    ctx = _Context(original_schema)
    out = _canon(payload, original_schema, "", ctx, 0)
    if out is not payload:
        oracle = ctx.oracle()
        if oracle is not None and not oracle.accepts("", out) and oracle.accepts("", payload):
            return payload
    return out


class _Oracle:
    """Validity at a location of the original schema, by the engine's interpreter."""

    __slots__ = ("interp", "locations")

    def __init__(self, interp: Interpreter, locations: dict[str, int]) -> None:
        self.interp = interp
        self.locations = locations

    def accepts(self, location: str, value: Any) -> bool:
        nid = self.locations.get(location)
        return nid is not None and self.interp.accepts(nid, value)


_ORACLE_CACHE_SIZE = 64
_oracles: OrderedDict[bytes, _Oracle | None] = OrderedDict()
_oracles_lock = threading.Lock()


def _build_oracle(root: Any) -> _Oracle | None:
    from validator._canonical import canonical_json
    from validator._issues import SchemaError

    try:
        key = canonical_json(root)
    except SchemaError:
        return None
    with _oracles_lock:
        if key in _oracles:
            _oracles.move_to_end(key)
            return _oracles[key]
    try:
        table, locations = build_located(root)
        oracle: _Oracle | None = _Oracle(Interpreter(table), locations)
    except (BuildError, RecursionError, TypeError, ValueError):
        oracle = None  # outside the engine's subset: the structural choice stands
    with _oracles_lock:
        _oracles[key] = oracle
        while len(_oracles) > _ORACLE_CACHE_SIZE:
            _oracles.popitem(last=False)
    return oracle


class _Context:
    """One call's original schema and, built on first need, its oracle."""

    __slots__ = ("_built", "_oracle", "root")

    def __init__(self, root: Any) -> None:
        self.root = root
        self._oracle: _Oracle | None = None
        self._built = False

    def oracle(self) -> _Oracle | None:
        if not self._built:
            self._oracle = _build_oracle(self.root)
            self._built = True
        return self._oracle


def _at(location: str, *tokens: str) -> str:
    return location + "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _canon(value: Any, schema: Any, loc: str, ctx: _Context, depth: int) -> Any:
    root = ctx.root
    schema, loc = _deref_at(schema, loc, root)
    if depth > 4 * _MAX_DEPTH or not isinstance(schema, Mapping):
        return value
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            index = _pick(value, branches, _at(loc, key), ctx, depth)
            if index is None:
                return value
            return _canon(value, branches[index], _at(loc, key, str(index)), ctx, depth + 1)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return _canon(value, all_of[0], _at(loc, "allOf", "0"), ctx, depth + 1)
    if isinstance(value, dict):
        return _canon_object(value, schema, loc, ctx, depth)
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return value
        where = _at(loc, "items")
        new = [_canon(v, items, where, ctx, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(new, value, strict=True)) else new
    return value


def _canon_object(
    value: dict[str, Any], schema: Mapping[str, Any], loc: str, ctx: _Context, depth: int
) -> Any:
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
        if member is None and key not in required and not accepts_null(sub, ctx.root):
            changed = True
            continue
        new = _canon(member, sub, _at(loc, "properties", key), ctx, depth + 1)
        changed = changed or new is not member
        out[key] = new
    return out if changed else value


def _deref(schema: Any, root: Any) -> Any:
    return _deref_at(schema, "", root)[0]


def _deref_at(schema: Any, loc: str, root: Any) -> tuple[Any, str]:
    """``schema`` with its ``$ref`` chain followed, and the location it ends at."""
    seen = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and seen < 32:
        ref = schema["$ref"]
        target = _resolve(ref, root)
        if target is None:
            return schema, loc
        schema = target
        loc = _ref_location(ref)
        seen += 1
    return schema, loc


def _ref_location(ref: str) -> str:
    from urllib.parse import unquote

    fragment = unquote(ref[1:])
    tokens = fragment[1:].split("/") if fragment else []
    return _at("", *(t.replace("~1", "/").replace("~0", "~") for t in tokens))


def _pick(value: Any, branches: list[Any], loc: str, ctx: _Context, depth: int) -> int | None:
    """The index of the branch the answer came from (see the module docstring)."""
    root = ctx.root
    fitting = [i for i, b in enumerate(branches) if _fits(value, _deref(b, root), root)]
    if len(fitting) <= 1:
        return fitting[0] if fitting else None
    oracle = ctx.oracle()
    if oracle is not None:
        for i in fitting:
            where = _at(loc, str(i))
            if oracle.accepts(where, _canon(value, branches[i], where, ctx, depth + 1)):
                return i
    if isinstance(value, dict):
        for i in fitting:
            target = _deref(branches[i], root)
            props = target.get("properties") if isinstance(target, Mapping) else None
            if isinstance(props, Mapping) and set(props) == set(value):
                return i
    return fitting[0]


def _fits(value: Any, schema: Any, root: Any) -> bool:
    """A structural match for picking a branch: type, declared keys, then discriminators
    (a member whose property has a ``const``/``enum`` the member is not in)."""
    if not isinstance(schema, Mapping):
        return schema is not False
    if "const" in schema:
        return json_equal(schema["const"], value)
    if isinstance(schema.get("enum"), list):
        return any(json_equal(v, value) for v in schema["enum"])
    t = schema.get("type")
    types = [t] if isinstance(t, str) else t if isinstance(t, list) else None
    if types is not None and not any(_is_type(value, x) for x in types):
        return False
    props = schema.get("properties")
    if isinstance(value, dict) and isinstance(props, Mapping):
        if not set(value) <= set(props):  # the projection closed every object
            return False
        required = schema.get("required")
        required = required if isinstance(required, list) else []
        if any(r not in value for r in required):
            return False
        for name, member in value.items():
            sub = _deref(props[name], root)
            if not isinstance(sub, Mapping) or not ("const" in sub or "enum" in sub):
                continue
            if member is None and name not in required and not accepts_null(sub, root):
                continue  # a null the projection injected: no evidence either way
            if not _fits(member, sub, root):
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
