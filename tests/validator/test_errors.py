"""What a validation error carries besides its message: the failing keyword's place in the
schema (through the ``$ref`` it followed), the offending value (itself, and cut short for
showing), correct plurals, and, for JSON that does not parse, the line, the column and the
text around them."""

from __future__ import annotations

import json
from typing import Any

import pytest

import validator

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "minLength": 1, "maxLength": 3},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}, "minItems": 1, "maxItems": 1},
        "kind": {"enum": ["a", "b"]},
        "pet": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["note"],
    "additionalProperties": False,
    "$defs": {"Line": {"type": "object", "properties": {"qty": {"type": "integer", "minimum": 1}}}},
}


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        (
            {"note": ""},
            (
                "/note",
                "minLength",
                "/note must be at least 1 character",
                "/properties/note/minLength",
                '""',
            ),
        ),
        (
            {"note": "abcd"},
            (
                "/note",
                "maxLength",
                "/note must be at most 3 characters",
                "/properties/note/maxLength",
                '"abcd"',
            ),
        ),
        (
            {"note": "a", "lines": []},
            (
                "/lines",
                "minItems",
                "/lines must have at least 1 item",
                "/properties/lines/minItems",
                "[]",
            ),
        ),
        (
            {"note": "a", "lines": [{}, {}]},
            (
                "/lines",
                "maxItems",
                "/lines must have at most 1 item",
                "/properties/lines/maxItems",
                "[{}, {}]",
            ),
        ),
        (
            {"note": "a", "lines": [{"qty": 0}]},
            (
                "/lines/0/qty",
                "minimum",
                "/lines/0/qty must be >= 1",
                "/$defs/Line/properties/qty/minimum",
                "0",
            ),
        ),
        (
            {"note": "a", "kind": "c"},
            ("/kind", "enum", '/kind must be one of ["a", "b"]', "/properties/kind/enum", '"c"'),
        ),
        (
            {"note": "a", "pet": [1]},
            (
                "/pet",
                "anyOf",
                "/pet must match at least one schema in anyOf",
                "/properties/pet/anyOf",
                "[1]",
            ),
        ),
        ({}, ("", "required", '/ must have required property "note"', "/required", "{}")),
        (
            {"note": "a", "x": 1},
            (
                "",
                "additionalProperties",
                '/ must not have additional property "x"',
                "/additionalProperties",
                '{"note": "a", "x": 1}',
            ),
        ),
        ([], ("", "type", "/ must be object", "/type", "[]")),
    ],
    ids=[
        "minLength 1",
        "maxLength",
        "minItems 1",
        "maxItems 1",
        "through a $ref",
        "enum",
        "anyOf",
        "required",
        "additionalProperties",
        "type",
    ],
)
def test_each_error_names_its_schema_path_and_value(
    instance: Any, expected: tuple[str, str, str, str, str]
) -> None:
    compiled = validator.compile(SCHEMA)
    [e] = compiled.validate(instance)
    assert (e.pointer, e.keyword, e.message, e.schema_path, e.value) == expected
    assert e.instance is _at(instance, e.pointer)  # the offending value itself


def _at(instance: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        instance = instance[int(token)] if isinstance(instance, list) else instance[token]
    return instance


def test_the_value_is_cut_short() -> None:
    compiled = validator.compile({"type": "object", "properties": {"s": {"type": "integer"}}})
    [e] = compiled.validate({"s": "x" * 10_000})
    assert len(e.value) == 80 and e.value.startswith('"xxx') and e.value.endswith("...")
    deep: list[Any] = []
    tip = deep
    for _ in range(10_000):
        tip.append([])
        tip = tip[0]
    [e] = compiled.validate({"s": deep})
    assert e.value == "[[[[[[[[[...]]]]]]]]]"


@pytest.mark.parametrize(
    ("raw", "message", "value"),
    [
        (
            b'{\n  "note": "a",\n  "kind": x\n}',
            "unexpected character, expected a JSON value at line 3 column 11",
            '...te": "a",\n  "kind": x\n}',
        ),
        (b'{"note": "a"', "unexpected end of data at line 1 column 13", '{"note": "a"'),
    ],
)
def test_json_that_does_not_parse_says_where(raw: bytes, message: str, value: str) -> None:
    [e] = validator.compile(SCHEMA).validate_json(raw)
    assert (e.pointer, e.keyword, e.message, e.schema_path, e.instance) == (
        "",
        "json",
        "/ is not valid JSON: " + message,
        "",
        value,
    )
    assert e.value == json.dumps(value)


def test_a_duplicate_key_names_the_key() -> None:
    [e] = validator.compile(SCHEMA).validate_json(b'{"note": "a", "note": "b"}')
    assert (e.pointer, e.keyword, e.instance, e.value) == ("", "json", "note", '"note"')


def test_one_of_names_the_branches_that_matched() -> None:
    compiled = validator.compile({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    [e] = compiled.validate(1)
    assert e.message == "/ must match exactly one schema in oneOf, not 2 (oneOf[0], oneOf[1])"
    assert e.schema_path == "/oneOf"
