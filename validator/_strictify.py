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

``canonicalize`` (the inverse on payloads) lives in ``validator._canonicalize``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from validator._canonicalize import accepts_null, canonicalize
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
                if isinstance(value, str) and value in FORMATS:
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
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            self.refuse(join(path, "required"), '"required" must be an array of names')
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
            if child is not None and optional and not accepts_null(sub, self.original):
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
    # Malformed values are left for the final lint of the projection to report.
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [*out["anyOf"], dict(_NULL)]
    if isinstance(out.get("enum"), list):
        out["enum"] = [*out["enum"], None]
    t = out.get("type")
    if isinstance(t, str):
        out["type"] = [t, "null"]
    elif isinstance(t, list):
        out["type"] = [*t, "null"]
    return out
