"""``lint`` per dialect, annotations, and the "a strict schema must constrain" rule."""

from __future__ import annotations

from typing import Any

import pytest

import validator
from validator import Issue, lint

NS = "schema_not_strict"
BAD = "invalid_tool_schema"
P = "tools[0].input_schema"


def _pairs(issues: list[Issue]) -> list[tuple[str, str]]:
    return [(i.code, i.param) for i in issues]


OPTIONAL = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
    "required": ["city"],
    "additionalProperties": False,
}
RECURSIVE = {
    "$ref": "#/$defs/Node",
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    },
}


def test_messages_accepts_optional_properties_left_out_of_required() -> None:
    assert lint(OPTIONAL, path=P, dialect="anthropic") == []


def test_chat_completions_still_requires_every_property() -> None:
    issues = lint(OPTIONAL, path="tools[0].function.parameters")
    assert _pairs(issues) == [(NS, "tools[0].function.parameters.required")]
    assert '"limit"' in issues[0].message


def test_messages_accepts_a_root_ref_to_an_object_definition() -> None:
    assert lint(RECURSIVE, path=P, dialect="anthropic") == []
    assert _pairs(lint(RECURSIVE, path="p")) == [
        (NS, "p"),
        (NS, "p.$defs.Node.required"),
    ]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({**OPTIONAL, "additionalProperties": True}, [(NS, P)]),
        ({k: v for k, v in OPTIONAL.items() if k != "additionalProperties"}, [(NS, P)]),
        ({"$ref": "#/$defs/S", "$defs": {"S": {"type": "string"}}}, [(NS, P)]),
        ({"type": "array", "items": {"type": "string"}}, [(NS, P)]),
        ({**OPTIONAL, "required": ["city", "town"]}, []),
    ],
    ids=[
        "open object",
        "no additionalProperties",
        "root ref to a string",
        "array root",
        "required names an undeclared property",
    ],
)
def test_messages_refuses_what_anthropic_refuses(
    schema: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert _pairs(lint(schema, path=P, dialect="anthropic")) == expected


ANNOTATED = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$comment": "generated",
    "type": "object",
    "title": "Search",
    "properties": {
        "q": {"type": "string", "examples": ["pizza"], "deprecated": False},
        "limit": {"type": ["integer", "null"], "default": 10, "readOnly": False},
        "pet": {
            "anyOf": [{"$ref": "#/$defs/Cat"}, {"type": "null"}],
            "discriminator": {"propertyName": "kind"},
            "writeOnly": True,
        },
        "owner": {"$ref": "#/$defs/Cat", "default": None, "title": "Owner"},
    },
    "required": ["q", "limit", "pet", "owner"],
    "additionalProperties": False,
    "$defs": {
        "Cat": {
            "type": "object",
            "properties": {"kind": {"const": "cat"}},
            "required": ["kind"],
            "additionalProperties": False,
        }
    },
}


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_annotations_are_accepted(dialect: validator.Dialect) -> None:
    assert lint(ANNOTATED, path="p", dialect=dialect) == []


def test_annotations_do_not_constrain_validation() -> None:
    compiled = validator.compile(ANNOTATED)
    ok = {"q": "x", "limit": None, "pet": None, "owner": {"kind": "cat"}}
    assert compiled.validate(ok) == []
    assert compiled.validate({**ok, "limit": "10"})  # default 10 is not a type


@pytest.mark.parametrize(
    "uri",
    [
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
    ],
)
def test_draft_07_and_2020_12_schema_uris(uri: str) -> None:
    schema = {**OPTIONAL, "required": ["city", "limit"], "$schema": uri}
    assert lint(schema) == []
    assert validator.compile(schema).validate({"city": "x", "limit": 1}) == []


@pytest.mark.parametrize(
    ("annotation", "param"),
    [
        ({"examples": "pizza"}, "p.properties.x.examples"),
        ({"deprecated": "yes"}, "p.properties.x.deprecated"),
        ({"$comment": 3}, "p.properties.x.$comment"),
    ],
)
def test_malformed_annotations_are_named(annotation: dict[str, Any], param: str) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "string", **annotation}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert _pairs(lint(schema, path="p")) == [(BAD, param)]


def _one(sub: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"x": sub},
        "required": ["x"],
        "additionalProperties": False,
    }


EMPTY = [
    ("empty schema", _one({}), "p.properties.x"),
    ("description only", _one({"description": "anything"}), "p.properties.x"),
    ("array without items", _one({"type": "array"}), "p.properties.x"),
    ("nullable array without items", _one({"type": ["array", "null"]}), "p.properties.x"),
    ("empty items", _one({"type": "array", "items": {}}), "p.properties.x.items"),
    ("empty anyOf branch", _one({"anyOf": [{"type": "string"}, {}]}), "p.properties.x.anyOf[1]"),
    (
        "empty definition",
        {**_one({"$ref": "#/$defs/D"}), "$defs": {"D": {"title": "D"}}},
        "p.$defs.D",
    ),
]


@pytest.mark.parametrize(("schema", "param"), [r[1:] for r in EMPTY], ids=[r[0] for r in EMPTY])
@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_strict_schema_must_constrain(
    schema: dict[str, Any], param: str, dialect: validator.Dialect
) -> None:
    issues = lint(schema, path="p", dialect=dialect)
    assert _pairs(issues) == [(NS, param)]


def test_constraining_keywords_are_enough() -> None:
    for sub in ({"enum": [1]}, {"const": "a"}, {"anyOf": [{"type": "null"}]}, {"type": "string"}):
        assert lint(_one(sub)) == []


def test_non_strict_compile_still_accepts_empty_schemas() -> None:
    assert validator.compile({"type": "object", "properties": {"x": {}}}).validate({"x": [1]}) == []


def test_uri_format_is_a_messages_format() -> None:
    schema = _one({"type": "string", "format": "uri"})
    assert lint(schema, dialect="anthropic") == []
    assert _pairs(lint(schema, path="p")) == [(BAD, "p.properties.x.format")]
    compiled = validator.compile(schema)  # the engine checks it whatever the dialect
    assert compiled.validate({"x": "https://example.org/a?b#c"}) == []
    assert compiled.validate({"x": "not a uri"})
