"""Property test: strictify an ordinary schema, generate a payload valid for the original, add
the nulls a strict model must send for absent optional members, and check ``canonicalize``
gives the payload back. ``jsonschema`` (Draft 2020-12) independently checks that the payload
fits the original and the null-filled payload fits the projection."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from validator import canonicalize, lint, strictify

NAMES = st.sampled_from(["a", "b", "default", "type", "properties", "a.b", "required", "x y"])
NULLABLE = {"type": ["string", "null"]}
DEF = {
    "type": "object",
    "properties": {"v": {"type": "integer"}, "w": {"type": "string"}},
    "required": ["v"],
}
LEAVES: list[dict[str, Any]] = [
    {"type": "string", "maxLength": 5},
    {"type": "integer", "minimum": 0},
    {"type": "boolean"},
    {"type": "number"},
    {"type": "string", "enum": ["x", "y", "z"]},
    {"const": "k"},
    NULLABLE,
    {"$ref": "#/$defs/D"},
]
SCALARS = LEAVES[:4]


def objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(NAMES, children, min_size=1, max_size=4))
        required = [n for n in props if draw(st.booleans())]
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        if draw(st.booleans()):
            schema["additionalProperties"] = True
        return schema

    return build()


def extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    one_obj = objects(children)
    return st.one_of(
        one_obj,
        children.map(lambda s: {"type": "array", "items": s}),
        # at most one object branch, beside a scalar: the payload names its branch
        st.tuples(st.sampled_from(SCALARS), one_obj, st.sampled_from(["anyOf", "oneOf"])).map(
            lambda t: {t[2]: [t[0], t[1]]}
        ),
    )


SCHEMAS = objects(st.recursive(st.sampled_from(LEAVES), extend, max_leaves=8)).map(
    lambda s: {**s, "$defs": {"D": DEF}}
)


def accepts_null(schema: dict[str, Any]) -> bool:
    return schema == NULLABLE


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    return DEF if schema.get("$ref") == "#/$defs/D" else schema


@st.composite
def instances(draw: st.DrawFn, schema: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(payload for the original, what a strict model sends, what canonicalize must give)."""
    schema = resolve(schema)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return draw(instances(draw(st.sampled_from(branches))))
    if "const" in schema:
        return (schema["const"],) * 3
    if "enum" in schema:
        v = draw(st.sampled_from(schema["enum"]))
        return v, v, v
    kind = schema["type"]
    if kind == "array":
        triples = draw(st.lists(instances(schema["items"]), max_size=3))
        return tuple([t[i] for t in triples] for i in range(3))  # type: ignore[return-value]
    if kind == "object":
        payload: dict[str, Any] = {}
        strict: dict[str, Any] = {}
        expected: dict[str, Any] = {}
        required = schema.get("required", [])
        for name, sub in schema["properties"].items():
            if name in required or draw(st.booleans()):
                payload[name], strict[name], expected[name] = draw(instances(sub))
            else:
                strict[name] = None
                if accepts_null(sub):  # the original takes null: it stays data
                    expected[name] = None
        return payload, strict, expected
    scalar = {
        "string": st.text(max_size=5),
        "integer": st.integers(min_value=0, max_value=10**6),
        "boolean": st.booleans(),
        "number": st.floats(allow_nan=False, allow_infinity=False, width=32),
        **{"['string', 'null']": st.one_of(st.none(), st.text(max_size=3))},
    }[str(kind) if isinstance(kind, list) else kind]
    v = draw(scalar)
    return v, v, v


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_canonicalize_inverts_strictify(data: st.DataObject) -> None:
    original = data.draw(SCHEMAS)
    frozen = copy.deepcopy(original)
    result = strictify(original)
    assert result.schema is not None, result.refusals
    assert original == frozen
    assert lint(result.schema) == []
    assert strictify(result.schema).schema == result.schema

    payload, strict, expected = data.draw(instances(original))
    assert Draft202012Validator(original).is_valid(payload)
    assert Draft202012Validator(result.schema).is_valid(strict), strict
    strict_copy = copy.deepcopy(strict)
    assert canonicalize(strict, original) == expected
    assert strict == strict_copy
    assert canonicalize(payload, original) == payload
