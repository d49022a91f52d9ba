"""The engine's intermediate form: a schema checked keyword by keyword into a flat table.

Both back ends (the generated fast path in ``_codegen`` and the error-collecting
interpreter in ``_interp``) read this table, never the schema dict, so they cannot
disagree about what a keyword means. Every node is addressed by an integer id; ``$ref``
is an id, so recursive schemas are plain cycles in the table. The builder defends itself
independently of lint: any keyword outside the subset, any malformed value, a non-local
``$ref``, a ``$ref`` cycle that never descends into the instance, or nesting deeper than
``MAX_SCHEMA_DEPTH`` raises ``BuildError`` (turned into ``SchemaError`` by ``_compile``).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import unquote

from validator._formats import FORMATS
from validator._paths import join, join_index, join_name
from validator._regex import PatternError, Searcher, searcher
from validator._table import (
    ALL_OF,
    ANY_OF,
    FALSE_NODE,
    ONE_OF,
    REF,
    TRUE,
    Node,
    Packed,
    Table,
    pack,
    type_set,
)

__all__ = ["MAX_SCHEMA_DEPTH", "BuildError", "Node", "Table", "build", "build_located"]

MAX_SCHEMA_DEPTH = 64
MAX_NODES = 200_000
SCHEMA_URIS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft-07/schema",
    }
)
TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_ANNOTATIONS = frozenset({"description", "title"})
# Annotations: accepted and ignored (they never constrain a value).
_IGNORED = frozenset(
    {"default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "discriminator"}
)
KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "allOf",
        "oneOf",
        "enum",
        "const",
        "$defs",
        "definitions",
        "$ref",
        "pattern",
        "format",
        "multipleOf",
        "$schema",
        *_COUNTS,
        *_BOUNDS,
        *_ANNOTATIONS,
        *_IGNORED,
    }
)


class BuildError(ValueError):
    """A schema the engine refuses; ``param`` is the lint-style path, ``message`` the reason."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


_TRUE = TRUE
_FALSE = FALSE_NODE


def _count(value: Any, param: str, keyword: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuildError(param, f"{keyword} must be a non-negative integer")
    if isinstance(value, float) and not value.is_integer():
        raise BuildError(param, f"{keyword} must be a non-negative integer")
    if value < 0:
        raise BuildError(param, f"{keyword} must be a non-negative integer")
    return int(value)


def _number(value: Any, param: str, keyword: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuildError(param, f"{keyword} must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise BuildError(param, f"{keyword} must be a finite number")
    return value


def _known_schema_uri(value: Any) -> bool:
    return isinstance(value, str) and value in SCHEMA_URIS


def _at(loc: str, *tokens: str) -> str:
    """``loc`` extended by ``tokens``, as a JSON pointer string.

    Locations are strings, not tuples, because tuples are objects the cyclic GC visits
    (until a pass untracks them) and a large schema has thousands.
    """
    return loc + "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _pointer_tokens(ref: str, param: str) -> list[str]:
    if not ref.startswith("#"):
        raise BuildError(param, f"$ref must be local (start with #), got {ref[:80]!r}")
    fragment = unquote(ref[1:])
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        raise BuildError(param, "$ref anchors are not supported")
    tokens = fragment[1:].split("/")
    for token in tokens:
        rest = token.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise BuildError(param, "$ref has an invalid JSON pointer escape")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


class _Builder:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.nodes: list[Packed | None] = []
        self.regex: dict[int, Searcher] = {}
        self.by_location: dict[str, int] = {}
        self.pending: list[tuple[int, Any, str, str]] = []

    def _reserve(self, location: str) -> int | None:
        if location in self.by_location:
            return self.by_location[location]
        if len(self.nodes) >= MAX_NODES:
            raise BuildError("", f"schema has more than {MAX_NODES} subschemas")
        self.by_location[location] = len(self.nodes)
        self.nodes.append(None)
        return None

    def build(self, schema: Any, location: str, param: str, depth: int) -> int:
        existing = self._reserve(location)
        if existing is not None:
            return existing
        node_id = len(self.nodes) - 1
        self.store(node_id, self._node(schema, location, param, depth))
        return node_id

    def store(self, node_id: int, node: Node) -> None:
        # Packed at once: the Node is garbage before the next allocation-driven collection.
        self.nodes[node_id] = pack(node)
        if node.regex is not None:
            self.regex[node_id] = node.regex

    def resolve(self, ref: str, param: str) -> int:
        tokens = _pointer_tokens(ref, param)
        target: Any = self.root
        for token in tokens:
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                raise BuildError(param, f"$ref target {ref[:80]!r} does not exist")
        location = _at("", *tokens)
        existing = self._reserve(location)
        if existing is not None:
            return existing
        node_id = len(self.nodes) - 1
        # Built later from the work list, so long $ref chains never deepen the Python stack.
        self.pending.append((node_id, target, location, param))
        return node_id

    def drain(self) -> None:
        while self.pending:
            node_id, target, location, param = self.pending.pop()
            self.store(node_id, self._node(target, location, param, 0))

    def _child(self, schema: Any, location: str, param: str, depth: int) -> int:
        if depth >= MAX_SCHEMA_DEPTH:
            raise BuildError(param, f"schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")
        return self.build(schema, location, param, depth + 1)

    def _node(self, schema: Any, loc: str, param: str, depth: int) -> Node:
        if schema is True:
            return _TRUE
        if schema is False:
            return _FALSE
        if not isinstance(schema, dict):
            raise BuildError(param, "a schema must be an object or a boolean")
        for key in schema:
            if key not in KEYWORDS:
                raise BuildError(join_name(param, key), f"unsupported keyword {key!r}")
        fields: dict[str, Any] = {}
        for key in _ANNOTATIONS:
            if key in schema and not isinstance(schema[key], str):
                raise BuildError(join(param, key), f"{key} must be a string")
        if "$schema" in schema and (loc or not _known_schema_uri(schema["$schema"])):
            raise BuildError(
                join(param, "$schema"), "only the draft 2020-12 or draft-07 $schema is supported"
            )
        for defs_key in ("$defs", "definitions"):  # draft-07 spells it "definitions"
            if defs_key not in schema:
                continue
            defs = schema[defs_key]
            if not isinstance(defs, dict):
                raise BuildError(join(param, defs_key), f"{defs_key} must be an object")
            for name, sub in defs.items():
                self._child(
                    sub, _at(loc, defs_key, name), join_name(join(param, defs_key), name), depth
                )
        if "type" in schema:
            fields["types"] = self._types(schema["type"], join(param, "type"))
        if "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str):
                raise BuildError(join(param, "$ref"), "$ref must be a string")
            fields["ref"] = self.resolve(ref, join(param, "$ref"))
        self._object(schema, loc, param, depth, fields)
        if "items" in schema:
            fields["items"] = self._child(
                schema["items"], _at(loc, "items"), join(param, "items"), depth
            )
        for key, name in (("anyOf", "any_of"), ("allOf", "all_of"), ("oneOf", "one_of")):
            if key not in schema:
                continue
            branches = schema[key]
            if not isinstance(branches, list) or not branches:
                raise BuildError(join(param, key), f"{key} must be a non-empty array")
            base = join(param, key)
            fields[name] = tuple(
                self._child(b, _at(loc, key, str(i)), join_index(base, i), depth)
                for i, b in enumerate(branches)
            )
        if "enum" in schema:
            if not isinstance(schema["enum"], list):
                raise BuildError(join(param, "enum"), "enum must be an array")
            fields["enum"] = tuple(schema["enum"])
        if "const" in schema:
            fields["has_const"] = True
            fields["const"] = schema["const"]
        self._scalars(schema, param, fields)
        return Node(**fields)

    def _types(self, value: Any, param: str) -> frozenset[str]:
        names = value if isinstance(value, list) else [value]
        if not names or any(not isinstance(n, str) or n not in TYPES for n in names):
            raise BuildError(param, "type must be a type name or an array of type names")
        if len(set(names)) != len(names):
            raise BuildError(param, "type names must be unique")
        return type_set(names)

    def _object(
        self,
        schema: dict[str, Any],
        loc: str,
        param: str,
        depth: int,
        fields: dict[str, Any],
    ) -> None:
        if "properties" in schema:
            props = schema["properties"]
            if not isinstance(props, dict):
                raise BuildError(join(param, "properties"), "properties must be an object")
            base = join(param, "properties")
            fields["properties"] = tuple(
                (name, self._child(sub, _at(loc, "properties", name), join_name(base, name), depth))
                for name, sub in props.items()
            )
        if "required" in schema:
            req = schema["required"]
            if not isinstance(req, list) or any(not isinstance(r, str) for r in req):
                raise BuildError(join(param, "required"), "required must be an array of strings")
            if len(set(req)) != len(req):
                raise BuildError(join(param, "required"), "required must not repeat names")
            fields["required"] = tuple(req)
        if "additionalProperties" in schema:
            fields["additional"] = self._child(
                schema["additionalProperties"],
                _at(loc, "additionalProperties"),
                join(param, "additionalProperties"),
                depth,
            )

    def _scalars(self, schema: dict[str, Any], param: str, fields: dict[str, Any]) -> None:
        for key, name in zip(
            _COUNTS, ("min_length", "max_length", "min_items", "max_items"), strict=True
        ):
            if key in schema:
                fields[name] = _count(schema[key], join(param, key), key)
        for key, name in zip(
            _BOUNDS, ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum"), strict=True
        ):
            if key in schema:
                fields[name] = _number(schema[key], join(param, key), key)
        if "multipleOf" in schema:
            value = _number(schema["multipleOf"], join(param, "multipleOf"), "multipleOf")
            if value <= 0:
                raise BuildError(join(param, "multipleOf"), "multipleOf must be greater than 0")
            fields["multiple_of"] = value
        if "pattern" in schema:
            pattern = schema["pattern"]
            if not isinstance(pattern, str):
                raise BuildError(join(param, "pattern"), "pattern must be a string")
            try:
                fields["regex"] = searcher(pattern)
            except PatternError as exc:
                raise BuildError(join(param, "pattern"), f"unsupported pattern: {exc}") from exc
            fields["pattern"] = pattern
        if "format" in schema:
            fmt = schema["format"]
            if not isinstance(fmt, str) or fmt not in FORMATS:
                raise BuildError(join(param, "format"), f"unsupported format {str(fmt)[:40]!r}")
            fields["format"] = fmt


def _same_instance_edges(node: Packed) -> list[int]:
    edges = [] if node[REF] is None else [node[REF]]
    for field in (ANY_OF, ALL_OF, ONE_OF):
        if node[field]:
            edges.extend(node[field])
    return edges


def _check_cycles(nodes: tuple[Packed, ...]) -> None:
    """Refuse $ref/anyOf/allOf/oneOf cycles that never move into the instance (they would
    never end)."""
    state = [0] * len(nodes)  # 0 new, 1 on stack, 2 done
    for start in range(len(nodes)):
        if state[start]:
            continue
        stack: list[tuple[int, int]] = [(start, 0)]
        state[start] = 1
        while stack:
            current, index = stack[-1]
            edges = _same_instance_edges(nodes[current])
            if index < len(edges):
                stack[-1] = (current, index + 1)
                nxt = edges[index]
                if state[nxt] == 1:
                    raise BuildError("$ref", "$ref cycle that never descends into the instance")
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, 0))
            else:
                state[current] = 2
                stack.pop()


def build(schema: Any) -> Table:
    """Check ``schema`` and return its node table; node 0 is the root. Raises BuildError."""
    return build_located(schema)[0]


def build_located(schema: Any) -> tuple[Table, dict[str, int]]:
    """``build``, with the node id of every schema location (a JSON pointer into
    ``schema``: ``""``, ``/properties/pet/anyOf/1``, ``/$defs/Dog``). Raises BuildError."""
    builder = _Builder(schema)
    builder.build(schema, "", "", 0)
    builder.drain()
    if any(n is None for n in builder.nodes):  # pragma: no cover - defensive
        raise BuildError("", "internal error: unresolved schema node")
    nodes = tuple(n for n in builder.nodes if n is not None)
    _check_cycles(nodes)
    locations = [""] * len(nodes)
    for location, nid in builder.by_location.items():
        locations[nid] = location
    return Table(nodes, builder.regex, tuple(locations)), builder.by_location
