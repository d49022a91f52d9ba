"""Strict projection of an ordinary JSON Schema (``strictify``) and its inverse (``canonicalize``).

Follows the prior art in ``shared/spec/prior-art-*.md``: produce an equivalent strict schema
or refuse with the exact path, never a silently different contract.

Projection, applied to every subschema (keyword-driven, so a property named ``default`` is
just a property):

* objects close with ``"additionalProperties": false``; every property becomes required,
  and a property that was optional becomes nullable: ``"null"`` joins ``type`` (and ``null``
  joins ``enum``); a ``$ref``/``const`` is wrapped as ``anyOf: [..., {"type": "null"}]``; an
  ``anyOf`` gains a ``{"type": "null"}`` branch. A property that already accepts null is
  left as it is (so its nulls stay data for ``canonicalize``).
* ``additionalProperties: true`` beside declared properties is closed (the declared keys are
  the documented contract, as in prior art #1); a missing ``type`` beside ``properties``
  becomes ``"object"``.
* ``oneOf`` -> ``anyOf``; root ``definitions`` -> ``$defs`` (refs rewritten); an ``allOf``
  of one schema with only annotations beside it is unwrapped (pydantic's ``$ref`` wrapper).
* dropped annotations: ``default``, ``examples``, ``example``, ``$schema``, ``$comment``,
  root ``$id``, ``deprecated``, ``readOnly``, ``writeOnly``, ``content*``, ``format``
  values outside the supported set, ``uniqueItems: false``.
* refused (``refusals``: one ``Issue`` each, ``code="invalid_tool_schema"``): a non-object
  root, free-form maps (``additionalProperties`` schema), open objects with no properties,
  ``allOf`` (other than the wrapper), ``not``, ``if``/``then``/``else``, tuple items
  (``prefixItems``/array ``items``), arrays without ``items``, schemas constraining nothing
  (no ``type``/``enum``/``const``/``anyOf``/``$ref``), constraints the subset cannot carry
  (``uniqueItems``, ``minProperties``, ``patternProperties``, ...), non-local refs,
  keywords beside ``$ref``, and anything the final ``lint`` of the projection still reports.
  Refusing beats loosening: the gateway guarantees the *projected* schema.

``canonicalize(payload, original)`` removes a ``null`` member exactly where the projection
made an optional property nullable, i.e. the property is not required by the original and
its original schema does not accept null. Everything else is returned as is (unchanged
subtrees keep their identity). Inside ``anyOf``/``oneOf`` the first branch the value fits
structurally (type, and for objects its declared keys) is followed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from validator._issues import Issue
from validator._limits import LIMITS, serialized_size
from validator._lint import ANNOTATIONS, FORMATS, lint
from validator._paths import join, join_index, join_name, parse_local_ref

__all__ = ["StrictifyResult", "canonicalize", "strictify"]

_DROP = frozenset(
    {
        "default", "examples", "example", "$schema", "$comment", "deprecated", "readOnly",
        "writeOnly", "contentMediaType", "contentEncoding", "contentSchema",
    }
)  # fmt: skip
_KEEP = frozenset(
    {
        "type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
        "description", "title",
    }
)  # fmt: skip
_MAX_DEPTH = 64
_NULL = {"type": "null"}


@dataclass(frozen=True, slots=True)
class StrictifyResult:
    """The projection (``schema``, ``None`` when refused), why not, and what was changed.

    Example::

        result = strictify({"type": "object", "properties": {"n": {"type": "integer"}}})
        result.schema["properties"]["n"]   # {"type": ["integer", "null"]}
        result.changes   # ('properties.n: optional, made required and nullable',)
    """

    schema: dict[str, Any] | None
    refusals: tuple[Issue, ...]
    changes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.schema is not None


def strictify(schema: Any, *, path: str = "") -> StrictifyResult:
    """Project ``schema`` onto the strict subset, or refuse with exact paths.

    Never mutates ``schema``; ``strictify(strictify(s).schema).schema == strictify(s).schema``.
    """
    size = serialized_size(schema, LIMITS.max_serialized_bytes)
    if size > LIMITS.max_serialized_bytes:  # refuse before doing any work on it
        limit = LIMITS.max_serialized_bytes
        message = f"serialized schema is over {limit} bytes (limit max_serialized_bytes)"
        issue = Issue("invalid_tool_schema", path, message)
        return StrictifyResult(None, (issue,), ())
    p = _Projector(path)
    projected = p.root(schema)
    if not p.refusals and projected is not None:
        p.refusals.extend(lint(projected, path=path))
    if p.refusals:
        return StrictifyResult(None, tuple(p.refusals), tuple(p.changes))
    return StrictifyResult(projected, (), tuple(p.changes))


class _Projector:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.refusals: list[Issue] = []
        self.changes: list[str] = []
        self.defs_key = "$defs"
        self.original: Any = None

    def refuse(self, path: str, message: str) -> None:
        self.refusals.append(Issue("invalid_tool_schema", path, message))

    def change(self, path: str, what: str) -> None:
        self.changes.append(f"{path or '(root)'}: {what}")

    def root(self, schema: Any) -> dict[str, Any] | None:
        path = self.prefix
        if not isinstance(schema, Mapping):
            self.refuse(path, "the root must be an object schema")
            return None
        self.original = schema
        node = dict(schema)
        if "definitions" in node:
            if "$defs" in node:
                self.refuse(join(path, "definitions"), 'both "definitions" and "$defs"')
                return None
            node["$defs"] = node.pop("definitions")
            self.defs_key = "definitions"
            self.change(path, 'renamed "definitions" to "$defs"')
        if "$id" in node:
            del node["$id"]
            self.change(path, 'dropped "$id"')
        t = node.get("type")
        if not (t == "object" or (t is None and "properties" in node)):
            self.refuse(path, 'the root must be "type": "object"')
            return None
        out = self.node(node, path, 0)
        defs = node.get("$defs")
        if out is not None and defs is not None:
            dpath = join(path, "$defs")
            if not isinstance(defs, Mapping):
                self.refuse(dpath, '"$defs" must be an object')
                return None
            out["$defs"] = {k: self.node(v, join_name(dpath, k), 1) for k, v in defs.items()}
        return out

    def node(self, schema: Any, path: str, depth: int) -> dict[str, Any] | None:
        if depth > _MAX_DEPTH:
            self.refuse(path, f"subschemas nested deeper than {_MAX_DEPTH} levels")
            return None
        if not isinstance(schema, Mapping):
            self.refuse(path, "a boolean or non-object subschema cannot be expressed")
            return None
        node = dict(schema)
        before = len(self.refusals)
        self._unwrap_all_of(node, path)
        if "oneOf" in node:
            if "anyOf" in node:
                self.refuse(join(path, "oneOf"), 'both "oneOf" and "anyOf"')
                return None
            node["anyOf"] = node.pop("oneOf")
            self.change(path, 'renamed "oneOf" to "anyOf"')
        if "$ref" in node:
            return self._ref(node, path)
        if "properties" in node and "type" not in node:
            node["type"] = "object"
            self.change(path, 'added "type": "object"')
        out: dict[str, Any] = {}
        for key, value in node.items():
            kpath = join(path, key)
            if key in _KEEP:
                try:  # a JSON copy: bounded depth, never recursion trouble
                    out[key] = orjson.loads(orjson.dumps(value))
                except (TypeError, orjson.JSONEncodeError):
                    self.refuse(kpath, "value is not plain JSON or is nested too deeply")
            elif key == "format":
                if value in FORMATS:
                    out[key] = value
                else:
                    self.change(path, f"dropped unsupported format {value!r}")
            elif key in _DROP or (key == "uniqueItems" and value is False):
                self.change(path, f'dropped "{key}"')
            elif key == "items":
                if isinstance(value, list):
                    self.refuse(kpath, "tuple items cannot be expressed")
                else:
                    out[key] = self.node(value, kpath, depth + 1)
            elif key == "anyOf":
                if not isinstance(value, list) or not value:
                    self.refuse(kpath, '"anyOf" must be a non-empty array')
                    continue
                out[key] = [
                    self.node(b, join_index(kpath, i), depth + 1) for i, b in enumerate(value)
                ]
            elif key in ("properties", "required", "additionalProperties"):
                continue  # handled by _object below
            elif key == "$defs" and depth == 0 and path == self.prefix:
                continue  # handled by root()
            else:
                self.refuse(kpath, f'"{key}" cannot be expressed in the strict subset')
        if len(self.refusals) > before:
            return None
        if not any(k in out for k in ("type", "enum", "const", "anyOf")):
            self.refuse(path, 'a schema with no "type", "enum", "const", "anyOf" or "$ref" '
                        "constrains nothing and cannot be expressed")  # fmt: skip
            return None
        if _has_type(node, "array") and "items" not in node:
            self.refuse(path, 'an array without "items" cannot be expressed')
        if _has_type(node, "object"):
            self._object(node, out, path, depth)
        return out

    def _unwrap_all_of(self, node: dict[str, Any], path: str) -> None:
        all_of = node.get("allOf")
        if not (isinstance(all_of, list) and len(all_of) == 1):
            return
        inner = all_of[0]
        others = set(node) - {"allOf"} - ANNOTATIONS - _DROP
        if isinstance(inner, Mapping) and not others and not (set(inner) & set(node)):
            del node["allOf"]
            node.update(inner)
            self.change(path, 'unwrapped a one-schema "allOf"')

    def _ref(self, node: dict[str, Any], path: str) -> dict[str, Any] | None:
        ref = node["$ref"]
        kpath = join(path, "$ref")
        if self.defs_key == "definitions" and str(ref).startswith("#/definitions/"):
            ref = "#/$defs/" + ref[len("#/definitions/") :]
        if not isinstance(ref, str) or parse_local_ref(ref) is None:
            self.refuse(kpath, "only local references (#/$defs/<name>) can be expressed")
            return None
        out: dict[str, Any] = {"$ref": ref}
        for key, value in node.items():
            if key in ANNOTATIONS:
                out[key] = value
            elif key in _DROP:
                self.change(path, f'dropped "{key}"')
            elif key != "$ref":
                self.refuse(join(path, key), f'"{key}" beside "$ref" cannot be expressed')
        return out

    def _object(self, node: dict[str, Any], out: dict[str, Any], path: str, depth: int) -> None:
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        ppath = join(path, "properties")
        if not isinstance(props, Mapping):
            self.refuse(ppath, '"properties" must be an object')
            return
        if isinstance(extra, Mapping):
            self.refuse(
                join(path, "additionalProperties"),
                "a free-form map (additionalProperties with a schema) cannot be expressed",
            )
            return
        if extra is not False and not props:
            self.refuse(path, "an open object with no properties cannot be expressed")
            return
        if extra is True:
            self.change(path, "closed an object that allowed additional properties")
        required = node.get("required", [])
        if not isinstance(required, list):
            self.refuse(join(path, "required"), '"required" must be an array')
            return
        undeclared = [r for r in required if r not in props]
        if undeclared:  # closing the object would forbid a key the original demands
            self.refuse(join(path, "required"), f"required but not declared: {undeclared}")
            return
        projected: dict[str, Any] = {}
        for name, sub in props.items():
            sub_path = join_name(ppath, name)
            child = self.node(sub, sub_path, depth + 1)
            optional = name not in required
            if child is not None and optional and not _accepts_null(sub, self.original):
                child = _nullable(child)
                self.change(sub_path, "optional, made required and nullable")
            projected[name] = child
        out["properties"] = projected
        out["required"] = list(props)
        out["additionalProperties"] = False


def _has_type(node: Mapping[str, Any], name: str) -> bool:
    t = node.get("type")
    return t == name or (isinstance(t, list) and name in t)


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node or "const" in node:
        notes = {k: v for k, v in node.items() if k in ANNOTATIONS}
        inner = {k: v for k, v in node.items() if k not in ANNOTATIONS}
        return {"anyOf": [inner, dict(_NULL)], **notes}
    out = dict(node)
    if "anyOf" in out:
        out["anyOf"] = [*out["anyOf"], dict(_NULL)]
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    t = out.get("type")
    if isinstance(t, str):
        out["type"] = [t, "null"]
    elif isinstance(t, list):
        out["type"] = [*t, "null"]
    return out


def _accepts_null(schema: Any, root: Any, depth: int = 0) -> bool:
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
            hits = sum(_accepts_null(b, root, depth + 1) for b in branches)
            if hits == 0 or (key == "oneOf" and hits != 1):
                return False
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and not all(_accepts_null(b, root, depth + 1) for b in all_of):
        return False
    if "not" in schema and _accepts_null(schema["not"], root, depth + 1):
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str) and root is not None:
        return _accepts_null(_resolve(ref, root), root, depth + 1)
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
        if member is None and key not in required and not _accepts_null(sub, root):
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
            props = _deref(branch, root).get("properties")
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
