"""Limits (one row per limit, just under and just over) and hostile input for ``lint``."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from validator import LIMITS, Limits, lint, lint_report, strictify

# A hang guard, not a speed check: walking the 100k levels quadratically would not end in
# it.
HANG_GUARD_S = 30.0

BAD = "invalid_tool_schema"


def obj(props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def many_props(n: int) -> dict[str, Any]:
    return obj({f"p{i}": {"type": "null"} for i in range(n)})


def nested_objects(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = obj({})
    for _ in range(levels - 1):
        schema = obj({"c": schema})
    return schema


def enums(sizes: list[int], width: int = 1) -> dict[str, Any]:
    return obj(
        {
            f"e{j}": {"type": "string", "enum": [f"{i:0{width}d}" for i in range(n)]}
            for j, n in enumerate(sizes)
        }
    )


def any_of(n: int) -> dict[str, Any]:
    return obj({"u": {"anyOf": [{"const": i} for i in range(n)]}})


def defs(n: int) -> dict[str, Any]:
    return {**obj({}), "$defs": {f"D{i}": {"type": "null"} for i in range(n)}}


def nested_items(levels: int) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        inner = {"type": "array", "items": inner}
    return obj({"a": inner})


# (limit name, schema just within, schema just over, param of the issue)
LIMIT_ROWS: list[tuple[str, Any, Any, str]] = [
    ("max_properties", many_props(5000), many_props(5001), "p"),
    ("max_depth", nested_objects(10), nested_objects(11), "p" + ".properties.c" * 10),
    ("max_enum_values", enums([500, 500]), enums([500, 501]), "p"),
    (
        "max_string_chars",
        obj({"c": {"const": "x" * 119_999}}),
        obj({"c": {"const": "x" * 120_000}}),
        "p",
    ),
    ("max_large_enum_chars", enums([251], 59), enums([251], 60), "p.properties.e0.enum"),
    (
        "max_serialized_bytes",
        obj({"a": {"type": "string", "description": "d" * 250_000}}),
        obj({"a": {"type": "string", "description": "d" * 270_000}}),
        "p",
    ),
    ("max_anyof_branches", any_of(500), any_of(501), "p"),
    ("max_defs", defs(500), defs(501), "p.$defs"),
    (
        "max_pattern_length",
        obj({"s": {"type": "string", "pattern": "a" * 1000}}),
        obj({"s": {"type": "string", "pattern": "a" * 1001}}),
        "p.properties.s.pattern",
    ),
    (
        "max_schema_depth",
        nested_items(62),
        nested_items(64),
        "p.properties.a" + ".items" * 63,
    ),
]


@pytest.mark.parametrize(
    ("name", "within", "over", "param"), LIMIT_ROWS, ids=[r[0] for r in LIMIT_ROWS]
)
def test_each_limit(name: str, within: Any, over: Any, param: str) -> None:
    assert lint(within, path="p") == []
    issues = lint(over, path="p")
    assert [(i.code, i.param) for i in issues] == [(BAD, param)]
    assert name in issues[0].message


def test_limits_are_configurable() -> None:
    tight = Limits(max_properties=2)
    assert lint(many_props(2), limits=tight) == []
    assert "max_properties" in lint(many_props(3), limits=tight)[0].message
    assert LIMITS.max_properties == 5000


def test_string_chars_count_names_defs_enums_and_consts() -> None:
    schema = {
        **obj({"abc": {"enum": ["xy", 7]}, "d": {"const": "hello"}}),
        "$defs": {"Name": {"type": "null"}},
    }
    counts = {c.name: c.value for c in lint_report(schema).counts}
    assert counts["string_chars"] == len("abc") + len("d") + 2 + 1 + 5 + len("Name")
    assert counts["properties"] == 2
    assert counts["enum_values"] == 2
    assert counts["defs"] == 1


def test_report_counts_create_refund() -> None:
    names = ["order_number", "amount_pence", "reason", "note"]
    reasons = ["damaged", "late", "wrong_item", "other"]
    schema = obj(
        {
            "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
            "amount_pence": {"type": "integer", "minimum": 1},
            "reason": {"type": "string", "enum": reasons},
            "note": {"type": ["string", "null"], "maxLength": 200},
        }
    )
    report = lint_report(schema, path="tools[0].function.parameters")
    assert report.ok
    counts = report.to_json()["counts"]
    assert counts["properties"] == {"value": 4, "limit": 5000}
    assert counts["nesting_depth"] == {"value": 1, "limit": 10}
    assert counts["enum_values"]["value"] == 4
    assert counts["string_chars"]["value"] == sum(map(len, names + reasons))
    assert counts["serialized_bytes"]["value"] == len(json.dumps(schema, separators=(",", ":")))
    assert counts["pattern_length"]["value"] == len("^[0-9]{6}$")


def _deep_dict(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


class _Weird:
    pass


HOSTILE: list[tuple[str, Any]] = [
    ("100k nested objects", _deep_dict(100_000)),
    ("non-string keys", {"type": "object", 1: 2, "properties": {3: {"type": "string"}}}),
    ("python set and object", obj({"a": {"enum": [{1, 2}, _Weird()]}, "b": _Weird()})),
    ("nan and infinity", obj({"a": {"type": "number", "minimum": float("nan")}})),
    ("tuple values", obj({"a": {"type": ("string",), "enum": ("a",)}})),
    ("bytes", b'{"type": "object"}'),
    ("unicode and separators", obj({"\u2028\"'\\\n": {"type": "string", "pattern": "\u2028"}})),
]


@pytest.mark.parametrize("schema", [r[1] for r in HOSTILE], ids=[r[0] for r in HOSTILE])
def test_hostile_input_never_crashes(schema: Any) -> None:
    start = time.perf_counter()
    issues = lint(schema, path="p")
    report = lint_report(schema)
    assert time.perf_counter() - start < HANG_GUARD_S
    assert isinstance(issues, list) and isinstance(report.issues, tuple)


def test_deep_nesting_is_reported_not_recursed() -> None:
    issues = lint(_deep_dict(100_000))
    assert any("max_depth" in i.message for i in issues)
    assert any("max_schema_depth" in i.message for i in issues)
    assert any("max_serialized_bytes" in i.message for i in issues)


def test_cyclic_python_structure_terminates() -> None:
    node: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["a"]}
    node["properties"] = {"a": node}
    issues = lint(node)
    assert any("max_schema_depth" in i.message for i in issues)
    assert any("max_serialized_bytes" in i.message for i in issues)


KEYS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$defs",
        "$ref",
        "pattern",
        "format",
        "minLength",
        "multipleOf",
        "allOf",
        "description",
        "$schema",
        "oneOf",
        "default",
        "a.b",
        "",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["object", "string", "#", "#/$defs/a", "(a)\\1", "date", "null"]),
)


# A named function: Hypothesis reads an ``extend`` lambda's source to check it recurses,
# and misreads one inside a multi-line call.
def _containers(kids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(kids, max_size=4), st.dictionaries(KEYS, kids, max_size=5))


JSON = st.recursive(SCALARS, _containers, max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_lint_and_strictify_never_raise_on_any_json(value: Any) -> None:
    issues = lint(value, path="p")
    assert all(i.param.startswith("p") for i in issues)
    report = lint_report(value)
    assert report.ok == (not report.issues)
    before = repr(value)  # repr, not ==: NaN (not JSON, but hostile input) != itself
    result = strictify(value)
    assert repr(value) == before  # never mutated
    assert (result.schema is None) == bool(result.refusals)
    if result.schema is not None:
        assert lint(result.schema) == []
        assert strictify(result.schema).schema == result.schema
