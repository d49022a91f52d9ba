"""The projection's contract, through the public API: ``strictify`` never accepts what the
original refuses (formats included), and ``canonicalize`` picks the union branch the
original accepts the answer under (a ``const`` discriminator, then validation), so an
answer the original accepts always comes back accepted.

The original is checked independently by ``jsonschema`` (Draft 2020-12, with formats
asserted: ``uri`` through the validator's own checker, as ``jsonschema`` needs an extra
package for it) and, for the pydantic models, by pydantic itself.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]

import validator
from validator import canonicalize, lint, openai_copy, strictify

_URI = validator.compile({"type": "string", "format": "uri"})
FORMATS = FormatChecker(["email", "date"])
FORMATS.checks("uri")(lambda v: _URI.is_valid(v))


def original_accepts(schema: dict[str, Any], value: Any) -> bool:
    return bool(Draft202012Validator(schema, format_checker=FORMATS).is_valid(value))


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    lives: int | None


class Owner(pydantic.BaseModel):
    pet: Annotated[Cat | Dog, pydantic.Field(discriminator="kind")]


class PlainOwner(pydantic.BaseModel):
    pet: Cat | Dog


MODELS = [Owner, PlainOwner]


@pytest.mark.parametrize("model", MODELS, ids=["discriminated oneOf", "plain anyOf"])
@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ({"pet": {"kind": "dog", "lives": None}}, {"pet": {"kind": "dog", "lives": None}}),
        ({"pet": {"kind": "dog", "lives": 3}}, {"pet": {"kind": "dog", "lives": 3}}),
        ({"pet": {"kind": "cat", "lives": None}}, {"pet": {"kind": "cat"}}),
        ({"pet": {"kind": "cat", "lives": 7}}, {"pet": {"kind": "cat", "lives": 7}}),
    ],
    ids=["dog null is data", "dog", "cat null was injected", "cat"],
)
def test_a_const_discriminator_picks_the_branch(
    model: type[pydantic.BaseModel], sent: dict[str, Any], expected: dict[str, Any]
) -> None:
    schema = model.model_json_schema()
    result = strictify(schema)
    assert result.schema is not None, result.refusals
    assert Draft202012Validator(result.schema).is_valid(sent)  # what a strict model sends
    out = canonicalize(sent, schema)
    assert out == expected
    assert original_accepts(schema, out)
    model.model_validate(out)  # pydantic agrees


def test_validation_picks_the_branch_when_types_decide() -> None:
    # Same keys in both branches, no discriminator: only the value's types tell them apart.
    a = {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x"],
    }
    b = {
        "type": "object",
        "properties": {"x": {"type": "string"}, "y": {"type": ["integer", "null"]}},
        "required": ["x", "y"],
    }
    schema = {"type": "object", "properties": {"v": {"anyOf": [a, b]}}, "required": ["v"]}
    assert canonicalize({"v": {"x": "s", "y": None}}, schema) == {"v": {"x": "s", "y": None}}
    assert canonicalize({"v": {"x": 1, "y": None}}, schema) == {"v": {"x": 1}}


def test_an_answer_the_original_accepts_is_never_made_invalid() -> None:
    # Both branches fit the keys; the first would drop the null the second needs, and the
    # engine cannot build this original (``not``), so the final check keeps the answer.
    first = {"type": "object", "properties": {"n": {"type": "integer"}}}
    second = {
        "type": "object",
        "properties": {"n": {"type": "null"}},
        "required": ["n"],
        "not": {"required": ["m"]},
    }
    schema = {"type": "object", "properties": {"v": {"anyOf": [first, second]}}}
    sent = {"v": {"n": None}}
    assert original_accepts(schema, sent)
    assert original_accepts(schema, canonicalize(sent, schema))


URL = {
    "type": "object",
    "properties": {"url": {"type": "string", "format": "uri"}},
    "required": ["url"],
}


def test_strictify_keeps_a_format_the_engine_checks() -> None:
    result = strictify(URL)
    assert result.schema is not None, result.refusals
    assert result.schema["properties"]["url"] == {"type": "string", "format": "uri"}
    projected = validator.compile(result.schema)
    assert [e.pointer for e in projected.validate({"url": ""})] == ["/url"]
    assert projected.validate({"url": "https://example.org/a"}) == []
    # The projection is strict under OpenAI's rules once the validator enforces the format;
    # OpenAI itself gets the copy, with the format named in the description.
    assert lint(result.schema, enforced_locally=True) == []
    vendor = openai_copy(result.schema)
    assert vendor["properties"]["url"] == {"type": "string", "description": "{format: uri}"}
    assert lint(vendor) == []
    assert result.schema["properties"]["url"]["format"] == "uri"  # the copy changed nothing


def test_openai_copy_is_the_same_object_when_nothing_moves() -> None:
    schema = {
        "type": "object",
        "properties": {"d": {"type": "string", "format": "date"}},
        "required": ["d"],
        "additionalProperties": False,
    }
    assert openai_copy(schema) is schema


def test_an_unknown_format_asserts_nothing_and_is_named() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "string", "format": "int64", "description": "An id"}},
        "required": ["n"],
    }
    result = strictify(schema)
    assert result.schema is not None, result.refusals
    assert result.schema["properties"]["n"] == {
        "type": "string",
        "description": "An id\n\n{format: int64}",
    }
    assert strictify(result.schema).schema == result.schema


# -- properties over generated unions ----------------------------------------------------

LEAVES: list[dict[str, Any]] = [
    {"type": "string", "format": "uri"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "date"},
    {"type": "string", "maxLength": 3},
    {"type": "integer", "minimum": 0},
    {"type": ["integer", "null"]},
    {"type": "boolean"},
    {"enum": ["a", "b"]},
]
POOL: list[Any] = [
    None,
    "",
    "x",
    "abcd",
    "https://example.org/p",
    "a@example.org",
    "2024-02-29",
    "a",
    "b",
    0,
    -1,
    7,
    2.5,
    True,
    [],
    {},
]
NAMES = ["kind", "n", "m", "url"]


@st.composite
def branch(draw: st.DrawFn, kind: str | None) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES[1:]), min_size=1, max_size=3, unique=True))
    props: dict[str, Any] = {n: draw(st.sampled_from(LEAVES)) for n in names}
    required = [n for n in names if draw(st.booleans())]
    if kind is not None:
        props = {"kind": {"const": kind, "type": "string"}, **props}
        required = ["kind", *required]
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    discriminated = draw(st.booleans())
    kinds = ["cat", "dog", "eel"] if discriminated else [None, None, None]
    count = draw(st.integers(min_value=2, max_value=3))
    branches = [draw(branch(kinds[i])) for i in range(count)]
    key = "oneOf" if discriminated and draw(st.booleans()) else "anyOf"
    union: dict[str, Any] = {key: branches}
    if draw(st.booleans()):  # through $defs, as pydantic writes it
        defs = {f"B{i}": b for i, b in enumerate(branches)}
        union = {key: [{"$ref": f"#/$defs/B{i}"} for i in range(count)]}
        return {"type": "object", "properties": {"pet": union}, "required": ["pet"], "$defs": defs}
    return {"type": "object", "properties": {"pet": union, "note": LEAVES[3]}, "required": ["pet"]}


@st.composite
def payloads(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """A value shaped like one of the union's branches, every member drawn from a pool of
    valid and invalid values (or left out, or null as a strict model sends it)."""
    union = schema["properties"]["pet"]
    branches = union.get("anyOf") or union.get("oneOf")
    chosen = draw(st.sampled_from(branches))
    if "$ref" in chosen:
        chosen = schema["$defs"][chosen["$ref"].rsplit("/", 1)[1]]
    pet: dict[str, Any] = {}
    for name, sub in chosen["properties"].items():
        if name == "kind":
            pet[name] = draw(st.sampled_from([sub["const"], "cat", "dog"]))
        elif draw(st.integers(0, 3)):
            pet[name] = draw(st.sampled_from(POOL))
    out: dict[str, Any] = {"pet": pet}
    if "note" in schema["properties"] and draw(st.booleans()):
        out["note"] = draw(st.sampled_from([None, "ab", "abcd"]))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_projection_then_canonicalize_never_accepts_what_the_original_refuses(
    data: st.DataObject,
) -> None:
    original = data.draw(schemas())
    result = strictify(original)
    if result.schema is None:  # overlapping oneOf branches are refused, never loosened
        assert "oneOf" in str(original)
        return
    projected = validator.compile(result.schema)
    sent = data.draw(payloads(original))
    frozen = copy.deepcopy(sent)
    out = canonicalize(sent, original)
    assert sent == frozen  # never mutated
    if projected.is_valid(sent):
        assert original_accepts(original, out), (sent, out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_an_answer_the_original_accepts_round_trips(data: st.DataObject) -> None:
    original = data.draw(schemas())
    sent = data.draw(payloads(original))
    if original_accepts(original, sent):
        assert original_accepts(original, canonicalize(sent, original)), sent
