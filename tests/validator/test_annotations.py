"""``without_annotations``: the provider copy drops annotation keywords only, keyword-driven."""

from __future__ import annotations

import copy

from validator import without_annotations


def test_drops_annotations_everywhere_and_keeps_the_rest() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$comment": "generated",
        "type": "object",
        "title": "T",
        "properties": {
            "default": {"type": "integer", "default": 3, "description": "a property"},
            "list": {"type": "array", "items": {"type": "string", "examples": ["x"]}},
            "pet": {"anyOf": [{"$ref": "#/$defs/Cat", "default": None}, {"type": "null"}]},
        },
        "required": ["default", "list", "pet"],
        "additionalProperties": False,
        "$defs": {"Cat": {"type": "object", "deprecated": True, "properties": {}}},
    }
    frozen = copy.deepcopy(schema)
    assert without_annotations(schema) == {
        "type": "object",
        "title": "T",
        "properties": {
            "default": {"type": "integer", "description": "a property"},
            "list": {"type": "array", "items": {"type": "string"}},
            "pet": {"anyOf": [{"$ref": "#/$defs/Cat"}, {"type": "null"}]},
        },
        "required": ["default", "list", "pet"],
        "additionalProperties": False,
        "$defs": {"Cat": {"type": "object", "properties": {}}},
    }
    assert schema == frozen  # the client's schema is never touched


def test_a_schema_without_annotations_is_returned_as_is() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "title": "A"}}}
    assert without_annotations(schema) is schema
