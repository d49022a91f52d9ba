"""``compile`` / ``validate``: messages, pointers, order, JSON semantics (table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

import validator

CREATE_REFUND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
        "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
        "note": {"type": ["string", "null"], "maxLength": 200},
    },
    "required": ["order_number", "amount_pence", "reason", "note"],
    "additionalProperties": False,
}
OK = {"order_number": "123456", "amount_pence": 1250, "reason": "damaged", "note": None}


@pytest.mark.parametrize(
    ("change", "messages"),
    [
        ({}, []),
        ({"amount_pence": "12"}, ["/amount_pence must be integer"]),
        ({"amount_pence": 12.0}, []),  # 12.0 is an integer in JSON
        ({"amount_pence": True}, ["/amount_pence must be integer"]),
        ({"amount_pence": 0}, ["/amount_pence must be >= 1"]),
        (
            {"reason": "lost"},
            ['/reason must be one of ["damaged", "late", "wrong_item", "other"]'],
        ),
        ({"order_number": "12345"}, ["/order_number must match pattern ^[0-9]{6}$"]),
        ({"order_number": "123456\n"}, ["/order_number must match pattern ^[0-9]{6}$"]),
        ({"note": "x" * 201}, ["/note must be at most 200 characters"]),
        ({"note": "é" * 200}, []),  # code points, not bytes
        ({"note": 5}, ["/note must be string or null"]),
        ({"x": 1}, ['/ must not have additional property "x"']),
        ({"note": ...}, ['/ must have required property "note"']),
        (
            {"amount_pence": "1", "reason": 3, "y": None},
            [
                "/amount_pence must be integer",
                "/reason must be string",
                '/reason must be one of ["damaged", "late", "wrong_item", "other"]',
                '/ must not have additional property "y"',
            ],
        ),
    ],
)
def test_create_refund_messages(change: dict[str, Any], messages: list[str]) -> None:
    instance = {k: v for k, v in {**OK, **change}.items() if v is not ...}
    compiled = validator.compile(CREATE_REFUND)
    errors = compiled.validate(instance)
    assert [e.message for e in errors] == messages
    assert compiled.is_valid(instance) is (messages == [])
    assert errors == compiled.validate(instance)  # deterministic


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        ({"type": "object"}, [], [("", "type", "/ must be object")]),
        ({"const": 1}, 1.0, []),
        ({"const": 1}, True, [("", "const", "/ must be equal to 1")]),
        ({"enum": [False]}, 0, [("", "enum", "/ must be one of [false]")]),
        ({"enum": [[1, {"a": 2.0}]]}, [1.0, {"a": 2}], []),
        (
            {"const": {"a": [1]}},
            {"a": [1], "b": 1},
            [("", "const", '/ must be equal to {"a": [1]}')],
        ),
        ({"type": "number", "multipleOf": 0.01}, 0.07, []),  # decimal, not 7.000000000000001
        ({"type": "integer", "multipleOf": 1e-8}, 12391239123, []),
        (
            {"type": "number", "multipleOf": 0.01},
            0.075,
            [("", "multipleOf", "/ must be a multiple of 0.01")],
        ),
        (
            {"type": "integer", "exclusiveMaximum": 3},
            3,
            [("", "exclusiveMaximum", "/ must be < 3")],
        ),
        (
            {"type": "string", "minLength": 2},
            "a",
            [("", "minLength", "/ must be at least 2 characters")],
        ),
        (
            {"type": "string", "format": "date"},
            "2021-02-29",
            [("", "format", "/ must be a valid date")],
        ),
        ({"type": "array", "minItems": 2}, [1], [("", "minItems", "/ must have at least 2 items")]),
        ({"type": "array", "maxItems": 0}, [1], [("", "maxItems", "/ must have at most 0 items")]),
        (
            {"type": "array", "items": {"type": "integer"}},
            [1, "a", 2, None],
            [("/1", "type", "/1 must be integer"), ("/3", "type", "/3 must be integer")],
        ),
        (
            {"properties": {"a/b": {"properties": {"~c": {"type": "null"}}}}},
            {"a/b": {"~c": 1}},
            [("/a~1b/~0c", "type", "/a~1b/~0c must be null")],
        ),
        (
            {"additionalProperties": {"type": "string"}},
            {"k": 1},
            [("/k", "type", "/k must be string")],
        ),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
            3,
            [("", "minimum", "/ must be >= 5")],  # the one branch of the right type explains
        ),
        (
            {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "string", "minLength": 5}]},
            "abc",
            [("", "anyOf", "/ must match at least one schema in anyOf")],
        ),
        (
            {
                "$defs": {"pos": {"type": "integer", "minimum": 1}},
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/pos"}},
            },
            {"n": 0},
            [("/n", "minimum", "/n must be >= 1")],
        ),
    ],
)
def test_keyword_errors(
    schema: dict[str, Any], instance: Any, expected: list[tuple[str, ...]]
) -> None:
    compiled = validator.compile(schema)
    assert [(e.pointer, e.keyword, e.message) for e in compiled.validate(instance)] == expected
    assert compiled.is_valid(instance) is (expected == [])


@pytest.mark.parametrize(
    ("raw", "messages"),
    [
        (b'{"n": 1}', []),
        ('{"n": "1"}', ["/n must be integer"]),
        (b'{"n": 1', ["/ is not valid JSON: unexpected end of data at line 1 column 8"]),
        (b"", ["/ is not valid JSON: Input is a zero-length, empty document at line 1 column 1"]),
        (
            b'{"n": NaN}',
            ["/ is not valid JSON: unexpected character, expected a JSON value at line 1 column 7"],
        ),
        (b"\xff", ["/ is not valid JSON: str is not valid UTF-8 at line 1 column 1"]),
    ],
)
def test_validate_json(raw: bytes | str, messages: list[str]) -> None:
    compiled = validator.compile({"type": "object", "properties": {"n": {"type": "integer"}}})
    errors = compiled.validate_json(raw)
    assert [e.message for e in errors] == messages
    assert all(e.keyword == "json" and e.pointer == "" for e in errors if "JSON" in e.message)


def test_long_enums_are_shortened_in_messages() -> None:
    compiled = validator.compile({"enum": [f"v{i}" for i in range(100)]})
    (error,) = compiled.validate("x")
    assert error.message.startswith('/ must be one of ["v0", "v1", ')
    assert error.message.endswith('"v19", ... (100 values)]')


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strnig"},
        {"required": "a"},
        {"not": {"type": "string"}},
        {"properties": {"a": {"uniqueItems": True}}},
        {"type": "string", "pattern": "(a)\\1"},
        {"type": "string", "format": "iri"},
        {"$ref": "https://example.com/s.json"},
        {"minimum": "1"},
        {"multipleOf": 0},
    ],
)
def test_outside_the_subset_raises_schema_error(schema: dict[str, Any]) -> None:
    with pytest.raises(validator.SchemaError) as caught:
        validator.compile(schema)
    assert caught.value.issues
    assert all(i.code == "invalid_tool_schema" for i in caught.value.issues)


def test_non_json_schema_raises_schema_error() -> None:
    with pytest.raises(validator.SchemaError):
        validator.compile({"type": "string", "enum": [object()]})
    with pytest.raises(validator.SchemaError):
        validator.compile({1: "x"})  # type: ignore[dict-item]


def test_big_integers_stay_exact() -> None:
    compiled = validator.compile({"const": 2**64 + 1})
    assert compiled.is_valid(2**64 + 1)
    assert not compiled.is_valid(2**64)
    assert compiled.schema == {"const": 2**64 + 1}
