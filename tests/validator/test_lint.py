"""Table-driven tests for ``lint``/``subset_issues``: one row per rule, code and ``param`` path."""

from __future__ import annotations

from typing import Any

import pytest

from validator import Issue, lint
from validator._lint import subset_issues

NS = "schema_not_strict"
BAD = "invalid_tool_schema"


def obj(props: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A strict object schema (closed, every property required) with ``extra`` keywords."""
    props = props or {}
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
        **extra,
    }


def one(schema: dict[str, Any]) -> dict[str, Any]:
    """Wrap ``schema`` as the single property ``x`` of a strict root."""
    return obj({"x": schema})


CREATE_REFUND = obj(
    {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
        "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
        "note": {"type": ["string", "null"], "maxLength": 200},
    }
)

# (id, schema, prefix, expected [(code, param)] in order)
ROWS: list[tuple[str, Any, str, list[tuple[str, str]]]] = [
    ("create_refund is clean", CREATE_REFUND, "tools[0].function.parameters", []),
    ("empty closed object", obj(), "", []),
    (
        "missing additionalProperties",
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        "p",
        [(NS, "p")],
    ),
    ("additionalProperties true", {**obj(), "additionalProperties": True}, "", [(NS, "")]),
    (
        "additionalProperties schema",
        {**obj(), "additionalProperties": {"type": "string"}},
        "",
        [(NS, "")],
    ),
    (
        "property missing from required",
        {**obj({"a": {"type": "string"}, "b": {"type": "string"}}), "required": ["a"]},
        "tools[0].function.parameters",
        [(NS, "tools[0].function.parameters.required")],
    ),
    (
        "required absent entirely",
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
        "",
        [(NS, "required")],
    ),
    ("root not an object", {"type": "string"}, "p", [(NS, "p")]),
    ("root nullable object", {**obj(), "type": ["object", "null"]}, "", [(NS, "")]),
    ("root with no type", {"anyOf": [obj()]}, "", [(NS, "")]),
    ("root is a list", [], "p", [(BAD, "p")]),
    ("root is null", None, "", [(BAD, "")]),
    ("root is true", True, "", [(BAD, "")]),
    (
        "nested object not closed",
        one({"type": "object", "properties": {"y": {"type": "string"}}, "required": ["y"]}),
        "p",
        [(NS, "p.properties.x")],
    ),
    (
        "array items object not closed",
        one({"type": "array", "items": {"type": "object", "properties": {}}}),
        "",
        [(NS, "properties.x.items")],
    ),
    (
        "items.items.anyOf path",
        obj(
            {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "array",
                        "items": {"anyOf": [{"type": "string"}, {"type": "strnig"}]},
                    },
                }
            }
        ),
        "tools[0].function.parameters",
        [(BAD, "tools[0].function.parameters.properties.items.items.items.anyOf[1].type")],
    ),
    ("typo in type", one({"type": "strnig"}), "", [(BAD, "properties.x.type")]),
    ("type array bad member", one({"type": ["string", 5]}), "", [(BAD, "properties.x.type[1]")]),
    (
        "type array duplicate",
        one({"type": ["string", "string"]}),
        "",
        [(BAD, "properties.x.type[1]")],
    ),
    ("type empty array", one({"type": []}), "", [(BAD, "properties.x.type")]),
    ("type nullable ok", one({"type": ["string", "null"]}), "", []),
    ("required not a list", {**obj(), "required": "a"}, "", [(BAD, "required")]),
    (
        "required entry not a string",
        {**obj({"a": {"type": "string"}}), "required": ["a", 3]},
        "",
        [(BAD, "required[1]")],
    ),
    (
        "required duplicate",
        {**obj({"a": {"type": "string"}}), "required": ["a", "a"]},
        "",
        [(BAD, "required[1]")],
    ),
    ("properties not an object", {**obj(), "properties": []}, "", [(BAD, "properties")]),
    ("property is a boolean schema", obj({"a": True}), "", [(BAD, "properties.a")]),
    ("keyword-named property default", obj({"default": {"type": "string"}}), "", []),
    (
        "keyword-named properties: type, properties",
        obj({"type": {"type": "strnig"}, "properties": obj({"default": {"x": 1}})}),
        "",
        [
            (BAD, "properties.type.type"),
            (BAD, "properties.properties.properties.default.x"),
        ],
    ),
    (
        "dotted property name quoted",
        obj({"a.b": {"type": "nope"}}),
        "",
        [(BAD, 'properties["a.b"].type')],
    ),
    (
        "spaced property name quoted",
        obj({"a b": {"minLength": -1}}),
        "p",
        [(BAD, 'p.properties["a b"].minLength')],
    ),
    (
        "empty property name quoted",
        obj({"": {"format": "iri"}}),
        "",
        [(BAD, 'properties[""].format')],
    ),
    (
        "$defs path",
        {
            **obj({"n": {"$ref": "#/$defs/Node"}}),
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        },
        "",
        [(NS, "$defs.Node"), (NS, "$defs.Node.required")],
    ),
    ("recursive root ref ok", obj({"self": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}), "", []),
    ("remote $ref", one({"$ref": "https://example.com/s.json"}), "", [(BAD, "properties.x.$ref")]),
    ("relative file $ref", one({"$ref": "other.json#/a"}), "", [(BAD, "properties.x.$ref")]),
    ("missing definition", one({"$ref": "#/$defs/Nope"}), "", [(BAD, "properties.x.$ref")]),
    ("deep pointer $ref", one({"$ref": "#/properties/x"}), "", [(BAD, "properties.x.$ref")]),
    ("$ref not a string", one({"$ref": 1}), "", [(BAD, "properties.x.$ref")]),
    (
        "$ref with sibling constraint",
        {**one({"$ref": "#/$defs/A", "minimum": 1}), "$defs": {"A": {"type": "integer"}}},
        "",
        [(BAD, "properties.x.minimum")],
    ),
    (
        "$ref with description ok",
        {**one({"$ref": "#/$defs/A", "description": "d"}), "$defs": {"A": {"type": "integer"}}},
        "",
        [],
    ),
    ("nested $defs", one({"type": "string", "$defs": {}}), "", [(BAD, "properties.x.$defs")]),
    ("$defs not an object", {**obj(), "$defs": []}, "", [(BAD, "$defs")]),
    (
        "$schema 2020-12 at root ok",
        {**obj(), "$schema": "https://json-schema.org/draft/2020-12/schema"},
        "",
        [],
    ),
    (
        "$schema other draft",
        {**obj(), "$schema": "http://json-schema.org/draft-04/schema#"},
        "",
        [(BAD, "$schema")],
    ),
    (
        "$schema nested",
        one({"type": "string", "$schema": "x"}),
        "",
        [(BAD, "properties.x.$schema")],
    ),
    (
        "pattern RE2 refuses backreference",
        one({"type": "string", "pattern": "(a)\\1"}),
        "",
        [(BAD, "properties.x.pattern")],
    ),
    (
        "pattern lookahead",
        one({"type": "string", "pattern": "(?=a)a"}),
        "",
        [(BAD, "properties.x.pattern")],
    ),
    (
        "pattern not a string",
        one({"type": "string", "pattern": 5}),
        "",
        [(BAD, "properties.x.pattern")],
    ),
    ("pattern ok", one({"type": "string", "pattern": "^(a+)+$"}), "", []),
    (
        "format unsupported",
        one({"type": "string", "format": "iri"}),
        "",
        [(BAD, "properties.x.format")],
    ),
    ("format supported", one({"type": "string", "format": "date-time"}), "", []),
    (
        "minLength negative",
        one({"type": "string", "minLength": -1}),
        "",
        [(BAD, "properties.x.minLength")],
    ),
    (
        "maxItems boolean",
        one({"type": "array", "items": {"type": "string"}, "maxItems": True}),
        "",
        [(BAD, "properties.x.maxItems")],
    ),
    (
        "minItems float integral ok",
        one({"type": "array", "items": {"type": "string"}, "minItems": 2.0}),
        "",
        [],
    ),
    (
        "minimum string",
        one({"type": "number", "minimum": "1"}),
        "",
        [(BAD, "properties.x.minimum")],
    ),
    (
        "exclusiveMinimum draft4 boolean",
        one({"type": "number", "exclusiveMinimum": True}),
        "",
        [(BAD, "properties.x.exclusiveMinimum")],
    ),
    (
        "multipleOf zero",
        one({"type": "number", "multipleOf": 0}),
        "",
        [(BAD, "properties.x.multipleOf")],
    ),
    ("enum empty", one({"enum": []}), "", [(BAD, "properties.x.enum")]),
    ("enum not a list", one({"enum": "a"}), "", [(BAD, "properties.x.enum")]),
    ("const anything ok", one({"const": {"a": [1, None]}}), "", []),
    (
        "description not a string",
        one({"type": "string", "description": 1}),
        "",
        [(BAD, "properties.x.description")],
    ),
    ("anyOf empty", one({"anyOf": []}), "", [(BAD, "properties.x.anyOf")]),
    (
        "anyOf branch boolean",
        one({"anyOf": [{"type": "string"}, False]}),
        "",
        [(BAD, "properties.x.anyOf[1]")],
    ),
    (
        "tuple items",
        one({"type": "array", "items": [{"type": "string"}]}),
        "",
        [(BAD, "properties.x.items")],
    ),
    (
        "additionalProperties wrong type",
        {**obj(), "additionalProperties": "no"},
        "",
        [(NS, ""), (BAD, "additionalProperties")],
    ),
    (
        "unknown keyword",
        one({"type": "string", "maxLenght": 3}),
        "",
        [(BAD, "properties.x.maxLenght")],
    ),
    (
        "all issues, document order",
        obj({"a": {"type": "strnig"}, "b": {"allOf": []}, "c": {"not": {}}}),
        "",
        [(BAD, "properties.a.type"), (BAD, "properties.b.allOf"), (BAD, "properties.c.not")],
    ),
]

UNSUPPORTED = [
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "$id",
    "$anchor",
    "$dynamicRef",
    "definitions",
    "additionalItems",
]


def _pairs(issues: list[Issue]) -> list[tuple[str, str]]:
    return [(i.code, i.param) for i in issues]


@pytest.mark.parametrize(
    ("schema", "prefix", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_lint_rows(schema: Any, prefix: str, expected: list[tuple[str, str]]) -> None:
    issues = lint(schema, path=prefix)
    assert _pairs(issues) == expected
    assert all(i.message for i in issues)


@pytest.mark.parametrize(
    ("schema", "prefix", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_subset_issues_are_the_invalid_ones(
    schema: Any, prefix: str, expected: list[tuple[str, str]]
) -> None:
    assert _pairs(subset_issues(schema, path=prefix)) == [e for e in expected if e[0] == BAD]


@pytest.mark.parametrize("keyword", UNSUPPORTED)
def test_every_unsupported_keyword_is_reported(keyword: str) -> None:
    issues = lint(one({"type": "string", keyword: {}}), path="tools[2].function.parameters")
    assert _pairs(issues) == [(BAD, f"tools[2].function.parameters.properties.x.{keyword}")]
    assert keyword in issues[0].message


def test_missing_required_names_each_property() -> None:
    schema = {**obj({"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}})}
    schema["required"] = ["b"]
    issues = lint(schema)
    assert [i.param for i in issues] == ["required", "required"]
    assert '"a"' in issues[0].message and '"c"' in issues[1].message


def test_subset_accepts_non_strict_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "m": {"additionalProperties": {"type": "integer"}}},
        "additionalProperties": True,
    }
    assert subset_issues(schema) == []
    assert {i.code for i in lint(schema)} == {NS}


def test_lint_does_not_mutate() -> None:
    schema = obj({"a": {"type": "strnig", "default": 1}})
    before = repr(schema)
    lint(schema)
    assert repr(schema) == before
