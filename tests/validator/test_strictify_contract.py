"""``strictify`` never loosens a contract, closes zero-argument objects, only projects the
definitions the root reaches, and drops annotation-only keywords."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

import validator
from validator import canonicalize, lint, strictify

I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}


def _root(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), **extra}


@pytest.mark.parametrize(
    "branches",
    [
        [I, N],
        [{"type": "string"}, {"type": "string", "maxLength": 3}],
        [{"type": "object", "properties": {"a": I}}, {"type": "object", "properties": {"b": I}}],
        [{"const": 1}, N],
    ],
    ids=["integer-number", "same type", "objects without a discriminator", "const in type"],
)
def test_overlapping_one_of_is_refused(branches: list[Any]) -> None:
    result = strictify(_root({"n": {"oneOf": branches}}), path="p")
    assert [(i.code, i.param) for i in result.refusals] == [
        ("invalid_tool_schema", "p.properties.n.oneOf")
    ]


def test_the_refused_one_of_would_have_loosened() -> None:
    # What a plain rename produces accepts 1, which the original refuses (1 is both).
    original = _root({"n": {"oneOf": [I, N]}})
    renamed = _root({"n": {"anyOf": [I, N]}}, additionalProperties=False)
    assert validator.compile(renamed).validate({"n": 1}) == []
    assert not Draft202012Validator(original).is_valid({"n": 1})


CAT = {
    "type": "object",
    "properties": {"kind": {"const": "cat"}, "lives": I},
    "required": ["kind", "lives"],
}
DOG = {
    "type": "object",
    "properties": {"kind": {"enum": ["dog"]}, "good": {"type": "boolean"}},
    "required": ["kind", "good"],
}


@pytest.mark.parametrize(
    "branches",
    [
        [I, {"type": "string"}],
        [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
        [{"const": "a"}, {"enum": ["b", "c"]}],
    ],
    ids=["disjoint types", "discriminated objects", "distinct values"],
)
def test_disjoint_one_of_becomes_any_of(branches: list[Any]) -> None:
    schema = _root(
        {"pet": {"oneOf": branches, "discriminator": {"propertyName": "kind"}}},
        **{"$defs": {"Cat": CAT, "Dog": DOG}},
    )
    result = strictify(schema)
    assert result.schema is not None, result.refusals
    pet = result.schema["properties"]["pet"]
    assert "oneOf" not in pet and "discriminator" not in pet
    assert len(pet["anyOf"]) == 2


def test_zero_argument_tool_is_closed() -> None:
    result = strictify({"type": "object", "properties": {}})
    assert result.schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert lint(result.schema) == []


@pytest.mark.parametrize(
    "schema",
    [{"type": "object"}, {"type": "object", "properties": {}, "additionalProperties": True}],
    ids=["no properties at all", "declared open"],
)
def test_free_form_objects_stay_refused(schema: dict[str, Any]) -> None:
    assert [i.param for i in strictify(schema, path="p").refusals] == ["p"]


BAD_DEF = {"type": "object", "additionalProperties": {"type": "string"}}


def test_unreferenced_definitions_do_not_count() -> None:
    schema = _root({"a": {"$ref": "#/$defs/Used"}}, **{"$defs": {"Used": I, "Unused": BAD_DEF}})
    result = strictify(schema)
    assert result.schema is not None, result.refusals
    assert result.schema["$defs"] == {"Used": I}
    assert any("Unused" in c for c in result.changes)


def test_referenced_bad_definitions_still_refuse() -> None:
    schema = _root(
        {"a": {"$ref": "#/$defs/Used"}},
        **{"$defs": {"Used": {"type": "array", "items": {"$ref": "#/$defs/Bad"}}, "Bad": BAD_DEF}},
    )
    assert [i.param for i in strictify(schema).refusals] == ["$defs.Bad.additionalProperties"]


def test_unused_definitions_only_schema_has_none_left() -> None:
    result = strictify(_root({"a": I}, **{"$defs": {"Unused": BAD_DEF}}))
    assert result.schema is not None and "$defs" not in result.schema


@pytest.mark.parametrize(
    "annotation",
    [{"optional": True}, {"discriminator": {"propertyName": "x"}}, {"default": 3}],
)
def test_annotation_only_keywords_are_dropped(annotation: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer", **annotation}}}
    result = strictify(schema)
    assert result.schema is not None, result.refusals
    assert result.schema["properties"]["a"] == {"type": ["integer", "null"]}
    assert canonicalize({"a": None}, schema) == {}
