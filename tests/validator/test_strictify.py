"""Table-driven tests for ``strictify`` (projection, refusals) and ``canonicalize`` (inverse)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import validator
from validator import canonicalize, lint, strictify

S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
NULL = {"type": "null"}


def closed(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
        **extra,
    }


# (id, input schema, expected projection)
PROJECTIONS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("already strict is unchanged", closed({"a": S}), closed({"a": S})),
    ("zero-argument tool", closed({}), closed({})),
    (
        "optional becomes required and nullable",
        {"type": "object", "properties": {"a": S, "b": I}, "required": ["a"]},
        closed({"a": S, "b": {"type": ["integer", "null"]}}),
    ),
    (
        "optional type list gains null",
        {"type": "object", "properties": {"a": {"type": ["string", "integer"]}}},
        closed({"a": {"type": ["string", "integer", "null"]}}),
    ),
    (
        "optional enum gains null",
        {"type": "object", "properties": {"e": {"type": "string", "enum": ["x", "y"]}}},
        closed({"e": {"type": ["string", "null"], "enum": ["x", "y", None]}}),
    ),
    (
        "optional already nullable is left alone",
        {"type": "object", "properties": {"n": {"type": ["string", "null"]}}},
        closed({"n": {"type": ["string", "null"]}}),
    ),
    (
        "optional anyOf gains a null branch",
        {"type": "object", "properties": {"u": {"anyOf": [S, I]}}},
        closed({"u": {"anyOf": [S, I, NULL]}}),
    ),
    (
        "oneOf becomes anyOf",
        {"type": "object", "properties": {"u": {"oneOf": [S, I]}}, "required": ["u"]},
        closed({"u": {"anyOf": [S, I]}}),
    ),
    (
        "optional const is wrapped",
        {"type": "object", "properties": {"c": {"const": 3, "description": "three"}}},
        closed({"c": {"anyOf": [{"const": 3}, NULL], "description": "three"}}),
    ),
    (
        "optional $ref is wrapped",
        {
            "type": "object",
            "properties": {"r": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "object", "properties": {"v": I}, "required": ["v"]}},
        },
        closed(
            {"r": {"anyOf": [{"$ref": "#/$defs/A"}, NULL]}}, **{"$defs": {"A": closed({"v": I})}}
        ),
    ),
    (
        "definitions renamed and refs rewritten",
        {
            "type": "object",
            "properties": {"r": {"$ref": "#/definitions/A"}},
            "required": ["r"],
            "definitions": {"A": S},
        },
        closed({"r": {"$ref": "#/$defs/A"}}, **{"$defs": {"A": S}}),
    ),
    (
        "annotations dropped, constraints kept",
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://example.com/x",
            "type": "object",
            "properties": {
                "s": {
                    "type": "string",
                    "default": "x",
                    "examples": ["y"],
                    "format": "uri",
                    "pattern": "^a",
                    "minLength": 1,
                },
                "d": {"type": "string", "format": "date"},
                "n": {"type": "number", "minimum": 0, "multipleOf": 0.5, "deprecated": True},
                "l": {"type": "array", "items": S, "minItems": 1, "uniqueItems": False},
            },
            "required": ["s", "d", "n", "l"],
        },
        closed(
            {
                "s": {"type": "string", "format": "uri", "pattern": "^a", "minLength": 1},
                "d": {"type": "string", "format": "date"},
                "n": {"type": "number", "minimum": 0, "multipleOf": 0.5},
                "l": {"type": "array", "items": S, "minItems": 1},
            }
        ),
    ),
    (
        "keyword-named properties are properties",
        {"type": "object", "properties": {"default": S, "properties": I, "type": S}},
        closed(
            {
                "default": {"type": ["string", "null"]},
                "properties": {"type": ["integer", "null"]},
                "type": {"type": ["string", "null"]},
            }
        ),
    ),
    (
        "nested objects and arrays of objects close",
        {
            "type": "object",
            "properties": {
                "o": {"properties": {"x": I}, "required": ["x"]},
                "l": {"type": "array", "items": {"type": "object", "properties": {"y": S}}},
            },
            "required": ["o", "l"],
        },
        closed(
            {
                "o": closed({"x": I}),
                "l": {"type": "array", "items": closed({"y": {"type": ["string", "null"]}})},
            }
        ),
    ),
    (
        "additionalProperties true beside properties is closed",
        {"type": "object", "properties": {"a": S}, "required": ["a"], "additionalProperties": True},
        closed({"a": S}),
    ),
    (
        "one-schema allOf wrapper is unwrapped",
        {
            "type": "object",
            "properties": {"r": {"allOf": [{"$ref": "#/$defs/A"}], "description": "d"}},
            "required": ["r"],
            "$defs": {"A": I},
        },
        closed({"r": {"$ref": "#/$defs/A", "description": "d"}}, **{"$defs": {"A": I}}),
    ),
    (
        "recursive definition",
        {
            "type": "object",
            "properties": {"head": {"$ref": "#/$defs/Node"}},
            "required": ["head"],
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"v": I, "next": {"$ref": "#/$defs/Node"}},
                    "required": ["v"],
                }
            },
        },
        closed(
            {"head": {"$ref": "#/$defs/Node"}},
            **{
                "$defs": {
                    "Node": closed({"v": I, "next": {"anyOf": [{"$ref": "#/$defs/Node"}, NULL]}})
                }
            },
        ),
    ),
]

# (id, input schema, prefix, expected refusal params in order)
REFUSALS: list[tuple[str, Any, str, list[str]]] = [
    ("non-object root", {"type": "array", "items": S}, "p", ["p"]),
    ("root not a dict", [1], "", [""]),
    ("open object, no properties", {"type": "object"}, "p", ["p"]),
    (
        "free-form map",
        {"type": "object", "properties": {"h": {"type": "object", "additionalProperties": S}}},
        "tools[0].function.parameters",
        ["tools[0].function.parameters.properties.h.additionalProperties"],
    ),
    (
        "map beside properties",
        {"type": "object", "properties": {"a": S}, "additionalProperties": I},
        "",
        ["additionalProperties"],
    ),
    (
        "allOf of two",
        {"type": "object", "properties": {"x": {"allOf": [S, {"minLength": 1}]}}},
        "",
        ["properties.x.allOf"],
    ),
    (
        "not",
        {"type": "object", "properties": {"x": {"type": "string", "not": S}}},
        "",
        ["properties.x.not"],
    ),
    (
        "if/then/else",
        {"type": "object", "properties": {"x": {"type": "string", "if": S, "then": S, "else": S}}},
        "",
        ["properties.x.if", "properties.x.then", "properties.x.else"],
    ),
    (
        "prefixItems",
        {"type": "object", "properties": {"t": {"type": "array", "prefixItems": [S]}}},
        "",
        ["properties.t.prefixItems"],
    ),
    (
        "tuple items",
        {"type": "object", "properties": {"t": {"type": "array", "items": [S, I]}}},
        "",
        ["properties.t.items"],
    ),
    (
        "array without items",
        {"type": "object", "properties": {"t": {"type": "array"}}},
        "",
        ["properties.t"],
    ),
    (
        "unconstrained",
        {"type": "object", "properties": {"a": {"description": "x"}}},
        "",
        ["properties.a"],
    ),
    ("boolean subschema", {"type": "object", "properties": {"a": True}}, "", ["properties.a"]),
    (
        "remote ref",
        {"type": "object", "properties": {"a": {"$ref": "http://x/y"}}},
        "",
        ["properties.a.$ref"],
    ),
    (
        "constraint beside ref",
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A", "minimum": 1}},
            "$defs": {"A": I},
        },
        "",
        ["properties.a.minimum"],
    ),
    (
        "uniqueItems true",
        {"type": "object", "properties": {"l": {"type": "array", "items": S, "uniqueItems": True}}},
        "",
        ["properties.l.uniqueItems"],
    ),
    (
        "nested in anyOf and $defs",
        {
            "type": "object",
            "properties": {"u": {"anyOf": [S, {"type": "object"}]}, "d": {"$ref": "#/$defs/D"}},
            "$defs": {"D": {"type": "object", "patternProperties": {}}},
        },
        "",
        ["properties.u.anyOf[1]", "$defs.D.patternProperties"],
    ),
    (
        "projection fails lint (bad pattern)",
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a)\\1"}}},
        "p",
        ["p.properties.s.pattern"],
    ),
    (
        "quoted name path",
        {"type": "object", "properties": {"a.b": {"not": S}}},
        "",
        ['properties["a.b"]' + ".not"],
    ),
]


@pytest.mark.parametrize(
    ("schema", "expected"), [r[1:] for r in PROJECTIONS], ids=[r[0] for r in PROJECTIONS]
)
def test_projection(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(schema)
    result = strictify(schema)
    assert result.refusals == ()
    assert result.schema == expected
    assert schema == before  # never mutates
    assert lint(result.schema, enforced_locally=True) == []
    assert lint(validator.openai_copy(result.schema)) == []  # what OpenAI gets
    again = strictify(result.schema)
    assert again.schema == result.schema  # idempotent
    assert strictify(expected).schema == expected


@pytest.mark.parametrize(
    ("schema", "prefix", "params"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_refusals(schema: Any, prefix: str, params: list[str]) -> None:
    before = copy.deepcopy(schema)
    result = strictify(schema, path=prefix)
    assert result.schema is None and not result.ok
    assert [r.param for r in result.refusals] == params
    assert all(r.code == "invalid_tool_schema" and r.message for r in result.refusals)
    assert schema == before


def test_changes_describe_the_work() -> None:
    result = strictify({"type": "object", "properties": {"a": {"type": "string", "default": "x"}}})
    assert "properties.a: optional, made required and nullable" in result.changes
    assert 'properties.a: dropped "default"' in result.changes
    assert strictify(closed({"a": S})).changes == ()


ORIGINAL = {
    "type": "object",
    "properties": {
        "a": S,
        "n": {"type": ["string", "null"]},
        "r": {"$ref": "#/$defs/Node"},
        "l": {"type": "array", "items": {"type": "object", "properties": {"x": I, "y": S}}},
        "u": {"anyOf": [I, {"type": "object", "properties": {"k": S, "m": I}, "required": ["m"]}]},
        "req": I,
    },
    "required": ["req"],
    "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}, "v": I}}},
}

# (id, payload, expected canonical payload)
CANON: list[tuple[str, Any, Any]] = [
    ("optional nulls removed", {"a": None, "req": 1}, {"req": 1}),
    ("nullable member keeps null", {"n": None, "req": 1}, {"n": None, "req": 1}),
    ("required null left alone", {"req": None}, {"req": None}),
    (
        "through $ref recursion",
        {"r": {"next": {"next": None, "v": 2}, "v": None}},
        {"r": {"next": {"v": 2}}},
    ),
    (
        "inside array items",
        {"l": [{"x": None, "y": "s"}, {"x": 1, "y": None}]},
        {"l": [{"y": "s"}, {"x": 1}]},
    ),
    ("anyOf object branch", {"u": {"k": None, "m": 3}}, {"u": {"m": 3}}),
    ("anyOf scalar branch", {"u": 4}, {"u": 4}),
    ("undeclared member untouched", {"zzz": None}, {"zzz": None}),
    ("non-object payload", [None], [None]),
    ("root null", None, None),
]


@pytest.mark.parametrize(("payload", "expected"), [r[1:] for r in CANON], ids=[r[0] for r in CANON])
def test_canonicalize(payload: Any, expected: Any) -> None:
    before = copy.deepcopy(payload)
    assert canonicalize(payload, ORIGINAL) == expected
    assert payload == before  # never mutates
    assert canonicalize(expected, ORIGINAL) == expected  # idempotent


def test_untouched_payload_keeps_identity() -> None:
    payload = {"a": "x", "l": [{"x": 1, "y": "s"}], "r": {"v": 1}, "req": 2}
    assert canonicalize(payload, ORIGINAL) is payload


def test_projected_original_accepts_payload_with_nulls() -> None:
    projected = strictify(ORIGINAL).schema
    assert projected is not None
    from validator import compile as compile_schema

    payload: dict[str, Any] = {
        "a": None,
        "n": None,
        "r": {"next": None, "v": 1},
        "l": [],
        "u": None,
        "req": 1,
    }
    assert compile_schema(projected).validate(payload) == []
    assert canonicalize(payload, ORIGINAL) == {"n": None, "r": {"v": 1}, "l": [], "req": 1}


def _deep_list(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _deep_schema(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


HOSTILE: list[tuple[str, Any, str]] = [
    ("deep const", {"type": "object", "properties": {"c": {"const": _deep_list(5000)}}}, "p"),
    ("deep schema", _deep_schema(5000), "p"),
    ("huge schema", {"type": "object", "description": "d" * 300_000}, "p"),
    ("non-json value", {"type": "object", "properties": {"e": {"enum": [{1}]}}}, "p"),
]


@pytest.mark.parametrize(
    ("schema", "prefix"), [r[1:] for r in HOSTILE], ids=[r[0] for r in HOSTILE]
)
def test_hostile_schemas_are_refused_cleanly(schema: Any, prefix: str) -> None:
    result = strictify(schema, path=prefix)
    assert result.schema is None
    assert result.refusals and all(r.param.startswith(prefix) for r in result.refusals)


def test_deep_payload_does_not_crash() -> None:
    items = {"type": "array", "items": {"$ref": "#/$defs/L"}}
    schema = {"type": "object", "properties": {"l": items}, "$defs": {"L": items}}
    payload = {"l": _deep_list(900)}
    assert canonicalize(payload, schema) is payload


_KEYS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "items",
        "anyOf",
        "oneOf",
        "allOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "a",
        "b",
        "x",
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=4),
    st.sampled_from(["object", "null", "#", "#/$defs/a", "#/definitions/b", "#/x"]),
)
_JSON = st.recursive(
    _SCALARS,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(_KEYS, kids, max_size=5)),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, _JSON)
def test_canonicalize_never_raises_or_mutates(payload: Any, schema: Any) -> None:
    before = copy.deepcopy(payload)
    out = canonicalize(payload, schema)
    assert payload == before
    assert canonicalize(out, schema) == out  # idempotent
