"""``validator.anthropic_copy`` as the Anthropic codec uses it: what an Anthropic upstream's
constrained decoding is given, from the client's schema (the answer is still validated
against the client's own), is what the scripted upstream (Anthropic's documented limits)
accepts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.anthropic_wire import _strict_refusal
from validator import anthropic_copy


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "integer", "minimum": 1, "maximum": 9},
            {"type": "integer", "description": "{minimum: 1, maximum: 9}"},
        ),
        (
            {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5, "description": "Pence"},
            {"type": "number", "description": "Pence\n\n{exclusiveMinimum: 0, multipleOf: 0.5}"},
        ),
        (
            {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^a"},
            {"type": "string", "description": "{minLength: 1, maxLength: 5, pattern: ^a}"},
        ),
        ({"type": "string", "format": "email"}, {"type": "string", "format": "email"}),
        (
            {"type": "string", "format": "iso-week"},
            {"type": "string", "description": "{format: iso-week}"},
        ),
        (
            {"type": "array", "items": {"type": "integer", "maximum": 3}, "minItems": 1},
            {
                "type": "array",
                "items": {"type": "integer", "description": "{maximum: 3}"},
                "minItems": 1,
            },
        ),
        (
            {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
            {
                "type": "array",
                "items": {"type": "string"},
                "description": "{maxItems: 4, minItems: 2}",
            },
        ),  # the SDK's order
        (
            {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            {"anyOf": [{"type": "integer", "description": "{minimum: 0}"}, {"type": "null"}]},
        ),
        ({"enum": ["a", "b"], "default": "a"}, {"enum": ["a", "b"], "description": "{default: a}"}),
        (
            {"type": "string", "format": ["not", "a", "name"]},
            {"type": "string", "description": "{format: ['not', 'a', 'name']}"},
        ),
        (
            {"type": "integer", "minItems": True},
            {"type": "integer", "description": "{minItems: True}"},
        ),
    ],
    ids=[
        "int-bounds",
        "number-bounds-described",
        "string-lengths-pattern",
        "format-kept",
        "format-moved",
        "items",
        "array-bounds",
        "oneof-as-anyof",
        "default",
        "format-not-str",
        "bool-min-items",
    ],
)
def test_a_node(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    assert anthropic_copy(schema) == expected


def test_a_whole_tool_schema_nested_definitions_included() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "line": {"$ref": "#/$defs/Line"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}, "maxItems": 10},
            "choice": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
        },
        "required": ["line", "lines", "choice"],
        "additionalProperties": False,
        "$defs": {
            "Line": {
                "type": "object",
                "properties": {"qty": {"type": "integer", "minimum": 1}},
                "required": ["qty"],
                "additionalProperties": False,
            }
        },
    }
    before = copy.deepcopy(schema)
    projected = anthropic_copy(schema)
    assert schema == before  # the client's schema (validated against later) is untouched
    assert _strict_refusal(schema) is not None
    assert _strict_refusal(projected) is None  # what Anthropic's strict mode accepts
    assert projected["$defs"]["Line"]["properties"]["qty"] == {
        "type": "integer",
        "description": "{minimum: 1}",
    }
    assert projected["properties"]["lines"]["description"] == "{maxItems: 10}"
    assert projected["properties"]["line"] == {"$ref": "#/$defs/Line"}
    assert projected["required"] == ["line", "lines", "choice"]
    assert projected["additionalProperties"] is False


def test_a_schema_within_the_subset_is_unchanged() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 0},
        },
        "required": ["when", "tags"],
        "additionalProperties": False,
        "title": "T",
    }
    assert anthropic_copy(schema) == schema
