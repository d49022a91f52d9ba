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
  the documented contract, as in the first prior art); a missing ``type`` beside ``properties``
  becomes ``"object"``.
* ``oneOf`` -> ``anyOf`` only when no value can match two branches (distinct types,
  distinct ``const``/``enum`` values, or a required property whose values differ); an
  overlapping ``oneOf`` is refused, since ``anyOf`` would accept a value the original
  refuses. Root ``definitions`` -> ``$defs`` (refs rewritten); an ``allOf`` of one schema
  with only annotations beside it is unwrapped (pydantic's ``$ref`` wrapper).
* only definitions reachable from the root through ``$ref`` are projected; the others are
  dropped (an unused bad definition does not refuse the tool).
* an object declared with empty ``properties`` (a zero-argument tool) is closed.
* dropped annotations: ``default``, ``examples``, ``example``, ``$schema``, ``$comment``,
  root ``$id``, ``deprecated``, ``readOnly``, ``writeOnly``, ``discriminator``, BFCL's
  ``optional``, ``content*``, ``uniqueItems: false``.
* ``format``: every format the engine checks stays (``uri`` too, which OpenAI's strict
  mode lacks: ``openai_copy`` moves it into the description for the vendor, whose answers
  are still validated against the projection), so the projection never accepts what the
  original refuses; a format the engine does not know asserts nothing and is named in the
  ``description`` (``{format: int64}``).
* refused (``refusals``: one ``Issue`` each, ``code="invalid_tool_schema"``): a non-object
  root, free-form maps (``additionalProperties`` schema), open objects with no declared
  properties (``{"type": "object"}``, or ``additionalProperties: true`` and none),
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
from validator._copies import describe
from validator._issues import Issue
from validator._jsonvalue import json_equal
from validator._limits import LIMITS, serialized_size
from validator._lint import ANNOTATIONS, ENGINE_FORMATS, lint
from validator._paths import join, join_index, join_name, parse_local_ref

__all__ = ["StrictifyResult", "canonicalize", "strictify"]

# Annotation-only keywords: they never constrain a value (BFCL's ``optional`` repeats what
# ``required`` says; OpenAPI's ``discriminator`` names what the branches already decide).
_DROP = frozenset(
    {
        "default",
        "examples",
        "example",
        "$schema",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "discriminator",
        "optional",
    }
)
_KEEP = frozenset(
    {
        "type",
        "enum",
        "const",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "description",
        "title",
    }
)
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
        # The formats the engine checks stay in the projection, beyond OpenAI's own.
        p.refusals.extend(lint(projected, path=path, enforced_locally=True))
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
            # Only definitions the root reaches are part of the contract: an unused bad one
            # must not refuse the tool.
            used = _reachable(node, defs, self.defs_key)
            for name in defs:
                if name not in used:
                    self.change(join_name(dpath, name), "dropped an unreferenced definition")
            kept = {k: self.node(v, join_name(dpath, k), 1) for k, v in defs.items() if k in used}
            if kept:
                out["$defs"] = kept
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
            branches = node["oneOf"]
            if isinstance(branches, list) and not _pairwise_disjoint(branches, self.original):
                # As "anyOf" it would accept a value that matches two branches, which the
                # original refuses: the projection must never loosen the contract.
                self.refuse(
                    join(path, "oneOf"),
                    '"oneOf" branches that can overlap cannot be expressed (as "anyOf" they '
                    "would accept a value matching several)",
                )
                return None
            node["anyOf"] = node.pop("oneOf")
            self.change(path, 'renamed "oneOf" (disjoint branches) to "anyOf"')
        if "$ref" in node:
            return self._ref(node, path)
        if "properties" in node and "type" not in node:
            node["type"] = "object"
            self.change(path, 'added "type": "object"')
        out: dict[str, Any] = {}
        moved: dict[str, Any] = {}
        for key, value in node.items():
            kpath = join(path, key)
            if key in _KEEP:
                try:  # a JSON copy: bounded depth, never recursion trouble
                    out[key] = orjson.loads(orjson.dumps(value))
                except (TypeError, orjson.JSONEncodeError):
                    self.refuse(kpath, "value is not plain JSON or is nested too deeply")
            elif key == "format":
                # Every format the engine checks stays: dropping one would accept what the
                # original refuses. A vendor lacking it gets it in the description through
                # its copy (``openai_copy``); an unknown one asserts nothing, so it is named.
                if isinstance(value, str) and value in ENGINE_FORMATS:
                    out[key] = value
                else:
                    moved[key] = value
                    self.change(path, f"moved unknown format {value!r} into the description")
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
        describe(out, moved)
        if len(self.refusals) > before:
            return None
        if not any(k in out for k in ("type", "enum", "const", "anyOf")):
            self.refuse(
                path,
                'a schema with no "type", "enum", "const", "anyOf" or "$ref" '
                "constrains nothing and cannot be expressed",
            )
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
            if extra is True or "properties" not in node:
                # A free-form object: closing it would delete what it carries.
                self.refuse(path, "an open object with no properties cannot be expressed")
                return
            self.change(path, "closed an object declared with no properties")
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


def _reachable(root: Mapping[str, Any], defs: Mapping[str, Any], key: str) -> set[str]:
    """Names of the definitions reachable from ``root`` (outside ``$defs``) through refs,
    transitively. A ``$ref``-shaped value inside ``const``/``enum``/``default`` counts too:
    that keeps a definition, which is only ever more work, never a looser contract."""
    prefixes = ("#/$defs/", f"#/{key}/")
    found: set[str] = set()
    todo = [v for k, v in root.items() if k != "$defs"]
    while todo:
        value = todo.pop()
        if isinstance(value, Mapping):
            ref = value.get("$ref")
            if isinstance(ref, str):
                for prefix in prefixes:
                    name = ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
                    if ref.startswith(prefix) and name in defs and name not in found:
                        found.add(name)
                        todo.append(defs[name])
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return found


def _pairwise_disjoint(branches: list[Any], root: Any) -> bool:
    """Whether no value can match two ``oneOf`` branches, decided conservatively: by
    types, by ``const``/``enum`` values, or by a required property whose ``const``/``enum``
    values differ (a discriminator)."""
    resolved = [_resolve_ref(b, root) for b in branches]
    return all(_disjoint(a, b) for i, a in enumerate(resolved) for b in resolved[i + 1 :])


def _resolve_ref(schema: Any, root: Any) -> Any:
    for _ in range(32):
        ref = schema.get("$ref") if isinstance(schema, Mapping) else None
        if not isinstance(ref, str) or not isinstance(root, Mapping):
            return schema
        name = parse_local_ref(ref)
        if name is None and ref.startswith("#/definitions/"):
            name = ref[len("#/definitions/") :]
        defs = root.get("$defs", root.get("definitions"))
        if not name or not isinstance(defs, Mapping) or name not in defs:
            return schema
        schema = defs[name]
    return schema


def _disjoint(a: Any, b: Any) -> bool:
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return False
    ta, tb = _types(a), _types(b)
    if ta is not None and tb is not None and not _types_overlap(ta, tb):
        return True
    va, vb = _values(a), _values(b)
    if va is not None and vb is not None and not any(json_equal(x, y) for x in va for y in vb):
        return True
    pa, pb = a.get("properties"), b.get("properties")
    ra, rb = a.get("required"), b.get("required")
    if not all(isinstance(x, Mapping) for x in (pa, pb)):
        return False
    if not all(isinstance(x, list) for x in (ra, rb)):
        return False
    assert isinstance(pa, Mapping) and isinstance(pb, Mapping)
    assert isinstance(ra, list) and isinstance(rb, list)
    for name in set(ra) & set(rb):
        if isinstance(name, str) and _disjoint_values(pa.get(name), pb.get(name)):
            return True
    return False


def _disjoint_values(a: Any, b: Any) -> bool:
    va = _values(a) if isinstance(a, Mapping) else None
    vb = _values(b) if isinstance(b, Mapping) else None
    return va is not None and vb is not None and not any(json_equal(x, y) for x in va for y in vb)


def _values(schema: Mapping[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return enum if isinstance(enum, list) else None


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return set(t)
    values = _values(schema)
    if values is not None:
        return {_json_type(v) for v in values}
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _types_overlap(a: set[str], b: set[str]) -> bool:
    if a & b:
        return True
    # Every integer is a number.
    return ("integer" in a and "number" in b) or ("number" in a and "integer" in b)


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
