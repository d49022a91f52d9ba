"""``dialect="anthropic"`` is Anthropic's strict mode as anthropic-python's
``transform_schema`` applies it, and ``anthropic_copy`` is that function: a differential
test against the SDK's own over every schema in these tests' fixtures, pydantic models and
generated schemas (key order and description text included), then the lint's verdicts
keyword by keyword."""

from __future__ import annotations

import copy
import datetime
import importlib
import json
import pkgutil
import uuid
from typing import Annotated, Any, Literal

import pydantic
import pytest
from anthropic.lib._parse._transform import transform_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.validator
import validator
from validator import anthropic_copy, lint

NOT_ANTHROPIC = "is not supported by Anthropic's strict mode"


def _schemas_in(value: Any, found: dict[str, Any], depth: int = 0) -> None:
    if depth > 6:
        return
    if isinstance(value, dict):
        looks = value.get("type") == "object" or "properties" in value or "$defs" in value
        if looks and all(isinstance(k, str) for k in value):
            try:
                found.setdefault(json.dumps(value, sort_keys=True), value)
            except (TypeError, ValueError, RecursionError):
                return  # not JSON, or one of the hostile (deeply nested) fixtures
        for v in value.values():
            _schemas_in(v, found, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            _schemas_in(v, found, depth + 1)


def fixture_schemas() -> list[Any]:
    """Every object schema the validator's tests define: module constants and
    ``parametrize`` arguments."""
    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(tests.validator.__path__):
        if not info.name.startswith("test_") or info.name == "test_anthropic_dialect":
            continue
        module = importlib.import_module(f"tests.validator.{info.name}")
        for value in vars(module).values():
            if isinstance(value, dict | list | tuple):
                _schemas_in(value, found)
            for mark in getattr(value, "pytestmark", []):
                _schemas_in(mark.args, found)
    return list(found.values())


class Line(pydantic.BaseModel):
    sku: Annotated[str, pydantic.Field(pattern=r"^[A-Z]{3}-\d+$", max_length=12)]
    qty: Annotated[int, pydantic.Field(ge=1, le=99)]
    price: Annotated[float, pydantic.Field(gt=0, multiple_of=0.01)]


class Node(pydantic.BaseModel):
    name: str
    children: list[Node] = []


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    good: bool


class Order(pydantic.BaseModel):
    """An order."""

    id: uuid.UUID
    placed: datetime.datetime
    due: datetime.date | None = None
    site: pydantic.HttpUrl
    lines: Annotated[list[Line], pydantic.Field(min_length=1, max_length=50)]
    tags: Annotated[list[str], pydantic.Field(min_length=2)] = []
    note: Annotated[str, pydantic.Field(min_length=1, description="Free text")] = "none"
    status: Literal["open", "closed"] = "open"
    pet: Annotated[Cat | Dog, pydantic.Field(discriminator="kind")]
    either: Cat | Dog | None = None
    tree: Node | None = None
    unique: set[int] = set()


MODELS: list[type[pydantic.BaseModel]] = [Line, Node, Cat, Order]


def _with_definitions(value: Any) -> bool:
    return "definitions" in json.dumps(value)


def _sdk(schema: Any) -> Any:
    try:
        return transform_schema(copy.deepcopy(schema))
    except (AssertionError, ValueError, TypeError, AttributeError):
        return None  # the SDK refuses it (a list of types, no type at all, ...)


def _differs(schema: Any) -> bool:
    """Whether ``anthropic_copy`` differs from the SDK (where the SDK takes the schema);
    key order and description text count (``json.dumps`` without sorting)."""
    sdk = _sdk(schema)
    if sdk is None or _with_definitions(schema):
        return False
    before = copy.deepcopy(schema)
    ours = anthropic_copy(schema)
    assert schema == before  # never mutated
    return json.dumps(ours, default=str) != json.dumps(sdk, default=str)


def _same(schema: Any) -> None:
    assert not _differs(schema), (schema, anthropic_copy(schema), _sdk(schema))


FIXTURES = fixture_schemas()


def test_the_fixtures_are_a_real_corpus() -> None:
    compared = [s for s in FIXTURES if _sdk(s) is not None and not _with_definitions(s)]
    assert len(FIXTURES) > 300 and len(compared) > 100, (len(FIXTURES), len(compared))


def test_anthropic_copy_is_transform_schema_over_the_fixtures() -> None:
    assert [s for s in FIXTURES if _differs(s)] == []


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_anthropic_copy_is_transform_schema_over_pydantic(
    model: type[pydantic.BaseModel],
) -> None:
    schema = model.model_json_schema()
    assert _sdk(schema) is not None
    _same(schema)


# The corners of transform_schema, each compared with the SDK.
EDGES: list[dict[str, Any]] = [
    {"type": "array", "items": {"type": "string"}, "minItems": True},
    {"type": "array", "items": {"type": "string"}, "minItems": 1.0},
    {"type": "array", "items": {"type": "string"}, "minItems": False},
    {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
    {"type": "string", "format": ""},
    {"type": "string", "format": "iso-week", "pattern": "^a", "description": "d"},
    {"type": "integer", "format": "int32"},
    {"type": "string", "enum": ["a", "b"], "default": "a"},
    {"type": "string", "const": "k", "title": "K"},
    {"enum": [], "type": "string"},
    {"const": {"a": 1}, "type": "object"},
    {"type": "object", "anyOf": [{"type": "string"}], "properties": {"a": {"type": "string"}}},
    {"anyOf": [{"type": "string"}], "allOf": [{"type": "integer"}]},
    {"oneOf": [{"type": "string"}, {"type": "null"}], "discriminator": {"propertyName": "k"}},
    {"$ref": "#/$defs/X", "description": "dropped", "$defs": {"X": {"type": "integer"}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "required": ["a"], "minProperties": 1},
    {"type": "null", "description": "n", "examples": [None]},
    {"type": "number", "description": 5, "minimum": 0},
]


@pytest.mark.parametrize("schema", EDGES, ids=lambda s: json.dumps(s)[:40])
def test_anthropic_copy_is_transform_schema_at_its_corners(schema: dict[str, Any]) -> None:
    if isinstance(schema.get("description"), int):
        assert _sdk(schema) is None  # the SDK cannot add its note to a number
        assert anthropic_copy(schema)["description"] == "5\n\n{minimum: 0}"
        return
    assert _sdk(schema) is not None, schema
    _same(schema)


KEYWORDS: dict[str, st.SearchStrategy[Any]] = {
    "minimum": st.integers(-3, 3),
    "maximum": st.floats(-1e3, 1e3),
    "exclusiveMinimum": st.just(0),
    "multipleOf": st.sampled_from([2, 0.5]),
    "minLength": st.integers(0, 3),
    "maxLength": st.integers(0, 9),
    "pattern": st.just("^a+$"),
    "format": st.sampled_from(["uri", "date", "email", "int64", "", "uuid"]),
    "minItems": st.sampled_from([0, 1, 2, True]),
    "maxItems": st.integers(0, 4),
    "uniqueItems": st.booleans(),
    "default": st.sampled_from([None, 1, "x", [1]]),
    "examples": st.just(["e"]),
    "title": st.text(max_size=3),
    "description": st.text(max_size=4),
    "enum": st.sampled_from([["a", "b"], [1, None], [{"o": 1}], []]),
    "const": st.sampled_from(["k", 3, None, {"o": 1}]),
    "deprecated": st.booleans(),
    "additionalProperties": st.sampled_from([True, False]),
    "required": st.just(["a"]),
}
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object"])


def generated() -> st.SearchStrategy[dict[str, Any]]:
    def node(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        @st.composite
        def build(draw: st.DrawFn) -> dict[str, Any]:
            kind = draw(TYPES)
            out: dict[str, Any] = {"type": kind}
            for key in draw(st.lists(st.sampled_from(sorted(KEYWORDS)), max_size=4, unique=True)):
                out[key] = draw(KEYWORDS[key])
            if kind == "object":
                out["properties"] = draw(
                    st.dictionaries(st.sampled_from("abc"), children, max_size=3)
                )
            if kind == "array" and draw(st.booleans()):
                out["items"] = draw(children)
            shape = draw(st.sampled_from(["plain", "anyOf", "oneOf", "allOf", "ref"]))
            if shape in ("anyOf", "oneOf", "allOf"):
                return {
                    shape: draw(st.lists(children, min_size=1, max_size=3)),
                    **({"description": "u"} if draw(st.booleans()) else {}),
                }
            if shape == "ref":
                return {"$ref": "#/$defs/D", "description": "beside $ref"}
            return out

        return build()

    leaf = st.builds(lambda t: {"type": t}, TYPES)
    tree = st.recursive(leaf, node, max_leaves=6)
    return st.builds(
        lambda props, d: {"type": "object", "properties": props, "$defs": {"D": d}},
        st.dictionaries(st.sampled_from(["x", "y", "z"]), tree, min_size=1, max_size=3),
        tree,
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated())
def test_anthropic_copy_is_transform_schema_over_generated_schemas(schema: Any) -> None:
    _same(schema)


def test_definitions_are_kept_where_the_sdk_breaks_them() -> None:
    schema = {
        "type": "object",
        "properties": {"r": {"$ref": "#/definitions/A"}},
        "required": ["r"],
        "definitions": {"A": {"type": "string", "maxLength": 3}},
    }
    sdk = transform_schema(copy.deepcopy(schema))
    assert "definitions" not in sdk and "definitions:" in sdk["description"]  # ref dangles
    ours = anthropic_copy(schema)
    assert ours["definitions"] == {"A": {"type": "string", "description": "{maxLength: 3}"}}
    assert "description" not in ours
    assert lint(ours, dialect="anthropic") == []


def test_a_list_of_types_keeps_what_each_type_keeps() -> None:
    node = {"type": ["string", "null"], "format": "uri", "maxLength": 9}
    assert _sdk(node) is None  # the SDK raises an AssertionError
    assert anthropic_copy(node) == {
        "type": ["string", "null"],
        "format": "uri",
        "description": "{maxLength: 9}",
    }


# -- the lint, keyword by keyword ---------------------------------------------------------


def _tool(sub: dict[str, Any], **root: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"x": sub},
        "required": ["x"],
        "additionalProperties": False,
        **root,
    }


MOVED = [
    {"type": "integer", "minimum": 1},
    {"type": "integer", "maximum": 1},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": "number", "exclusiveMaximum": 0},
    {"type": "number", "multipleOf": 0.5},
    {"type": "string", "minLength": 1},
    {"type": "string", "maxLength": 1},
    {"type": "string", "pattern": "^a$"},
    {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    {"type": "array", "items": {"type": "string"}, "minItems": 2},
    {"enum": ["a", {"b": 1}]},
    {"const": {"b": 1}},
]


@pytest.mark.parametrize(
    "sub", MOVED, ids=lambda s: next(k for k in s if k not in ("type", "items"))
)
def test_what_transform_schema_moves_is_an_anthropic_issue(sub: dict[str, Any]) -> None:
    schema = _tool(sub)
    keyword = next(k for k in sub if k not in ("type", "items"))
    issues = lint(schema, path="p", dialect="anthropic")
    assert [(i.code, i.param) for i in issues] == [
        ("invalid_tool_schema", f"p.properties.x.{keyword}")
    ]
    assert "Anthropic" in issues[0].message
    moved = anthropic_copy(schema)["properties"]["x"]
    assert keyword not in moved and "description" in moved  # the SDK moves it too
    # Enforced by the caller: not an issue, and the validator checks it.
    assert lint(schema, dialect="anthropic", enforced_locally=True) == []
    validator.compile(schema)


@pytest.mark.parametrize(
    "sub",
    [
        {"type": "array", "items": {"type": "string"}, "minItems": 1},
        {"type": "string", "format": "uri"},
        {"allOf": [{"type": "string"}, {"enum": ["a", "b"]}]},
        {"$ref": "#/definitions/A"},
    ],
    ids=["minItems 1", "uri", "allOf", "definitions"],
)
def test_what_transform_schema_keeps_is_anthropic(sub: dict[str, Any]) -> None:
    schema = _tool(sub, definitions={"A": {"type": "integer"}})
    assert lint(schema, dialect="anthropic") == []
    assert lint(schema, dialect="openai") != []  # OpenAI's strict mode takes none of these
    compiled = validator.compile(schema)
    assert compiled.validate({"x": 5 if "$ref" in sub else "a"}) == [] or "$ref" not in sub


def test_all_of_and_definitions_are_enforced() -> None:
    compiled = validator.compile(_tool({"allOf": [{"type": "string"}, {"enum": ["a", "b"]}]}))
    assert compiled.validate({"x": "a"}) == []
    assert [e.keyword for e in compiled.validate({"x": "c"})] == ["enum"]
    refs = validator.compile(
        _tool({"$ref": "#/definitions/A"}, definitions={"A": {"type": "integer"}})
    )
    assert refs.validate({"x": 1}) == [] and refs.validate({"x": "1"})


def test_one_of_is_sent_as_any_of_so_only_a_local_check_holds_it() -> None:
    schema = _tool({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    [issue] = lint(schema, path="p", dialect="anthropic")
    assert issue.param == "p.properties.x.oneOf" and "anyOf" in issue.message
    assert lint(schema, dialect="anthropic", enforced_locally=True) == []
    assert anthropic_copy(schema)["properties"]["x"] == {
        "anyOf": [{"type": "integer"}, {"type": "number"}]
    }
    compiled = validator.compile(schema)  # 1 is both: exactly one must match
    assert [e.keyword for e in compiled.validate({"x": 1})] == ["oneOf"]
    assert compiled.validate({"x": 1.5}) == []


def test_the_copy_of_any_schema_is_anthropic() -> None:
    """What the copy keeps is within Anthropic's keywords, for every fixture the engine
    takes (structural rules, such as a missing ``required``, are the caller's)."""
    checked, wrong = 0, list[validator.Issue]()
    for schema in FIXTURES:
        try:
            validator.compile(schema)
        except validator.SchemaError:
            continue
        checked += 1
        issues = lint(anthropic_copy(schema), dialect="anthropic")
        wrong.extend(i for i in issues if NOT_ANTHROPIC in i.message)
    assert checked > 300 and wrong == []
