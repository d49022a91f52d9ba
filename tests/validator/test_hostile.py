"""Hostile schemas and instances, through the public API."""

from __future__ import annotations

import builtins
import copy
import io
import os
import socket
import time
import tokenize
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import validator
from validator._codegen import generate
from validator._compile import engine
from validator._errgen import generate_errors
from validator._interp import MAX_INSTANCE_DEPTH
from validator._ir import BuildError, build
from validator._regex import compile_pattern


def _payloads(sentinel: Path) -> list[str]:
    cmd = f"touch {sentinel}"
    return [
        f"__import__('os').system('{cmd}')",
        f'"); __import__("os").system("{cmd}"); ("',
        f"'''); __import__('os').system('{cmd}'); ('''",
        f'"""\n__import__("os").system("{cmd}")\n"""',
        f"\\'); import os; os.system('{cmd}') #",
        f"x\u2028__import__('os').system('{cmd}')",
        f"{{{{__import__('os').system('{cmd}')}}}}",
        "\\",
        "\n",
        "\x00",
        "",
        "_c1",
        "x; return True",
    ]


def _no_strings_in_source(schema: Any) -> None:
    """The generated sources (the verdict's and the errors') have no string literals:
    schema text never becomes code."""
    _fn, source = generate(build(schema))
    _errors, namespace, error_source = generate_errors(build(schema))
    namespace.clear()
    for text in (source, error_source):
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        assert [t.string for t in tokens if t.type == tokenize.STRING] == []


def test_injection_payloads_compile_validate_and_run_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sentinel = tmp_path / "pwned"
    calls: list[Any] = []

    def fake_system(*args: Any) -> int:
        calls.append(args)
        return 0

    monkeypatch.setattr(os, "system", fake_system)
    for text in _payloads(sentinel):
        schema = {
            "type": "object",
            "description": text,
            "title": text,
            "properties": {
                text: {"type": "string", "enum": [text, "other"], "description": text},
                "k": {"const": {text: [text]}},
            },
            "required": [text, "k"],
            "additionalProperties": False,
        }
        compiled = validator.compile(schema)
        _no_strings_in_source(schema)
        good = {text: text, "k": {text: [text]}}
        assert compiled.validate(good) == []
        errors = compiled.validate({text: text + "!", "k": {text: [text]}, text + "?": 1})
        assert [e.keyword for e in errors] == ["enum", "additionalProperties"]
        assert errors[0].pointer == "/" + text.replace("~", "~0").replace("/", "~1")
    assert calls == []
    assert not sentinel.exists()


def test_hostile_patterns_are_data(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    tried = 0
    for text in _payloads(sentinel):
        schema = {"type": "string", "pattern": text}
        if any(i.code == "invalid_tool_schema" for i in validator.lint(schema)):
            with pytest.raises(validator.SchemaError):
                validator.compile(schema)
            continue
        tried += 1
        compiled = validator.compile(schema)
        _no_strings_in_source(schema)
        oracle = compile_pattern(text)
        for probe in (text, "os", "", "x('y')"):
            assert compiled.is_valid(probe) is (oracle.search(probe) is not None)
    assert tried >= 3
    assert not sentinel.exists()


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=12), value=st.text(max_size=12))
def test_fuzzed_names_and_values(name: str, value: str) -> None:
    schema = {
        "type": "object",
        "properties": {name: {"enum": [value]}, "c": {"const": value}},
        "required": [name],
        "additionalProperties": False,
    }
    compiled = validator.compile(schema)
    _no_strings_in_source(schema)
    assert compiled.validate({name: value}) == []
    assert not compiled.is_valid({name: value + "x"})
    assert compiled.is_valid({name: value, "c": value}) is True
    assert not compiled.is_valid({name: value, "c": value + "x"}) or name == "c"


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "http://127.0.0.1:9/schema.json"},
        {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        {"$ref": "file:///etc/passwd"},
        {"$id": "http://127.0.0.1:9/root.json", "$ref": "item.json"},
        {"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd#/x"}}},
        {"$defs": {"a": {"$id": "http://evil/"}}, "$ref": "#/$defs/a"},
        {"$ref": "#/$defs/missing"},
        {"$ref": "//evil.example/x"},
    ],
)
def test_refs_never_touch_network_or_files(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = {**schema, "title": uuid.uuid4().hex}  # never served from the cache

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"I/O attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(io, "open", refuse)
    with pytest.raises(validator.SchemaError):
        validator.compile(schema)


# A hang guard, not a speed check (that is tests/bench/hostile_input_bench.py): backtracking
# or a quadratic scan over a megabyte would run for hours.
HANG_GUARD_S = 30.0


ADVERSARIAL = [
    ("^(a+)+$", "a" * (1 << 20) + "!"),
    ("(a|aa)+$", "a" * (1 << 20) + "!"),
    ("^(\\w+\\s?)*$", "a" * (1 << 20) + "!"),
    ("(x+x+)+y", "x" * (1 << 20)),
    ("^[a-z]+[0-9]$", "a" * (1 << 20) + "!"),
]


@pytest.mark.parametrize(("pattern", "text"), ADVERSARIAL)
def test_adversarial_patterns_are_linear(pattern: str, text: str) -> None:
    compiled = validator.compile({"type": "string", "pattern": pattern})
    started = time.perf_counter()
    errors = compiled.validate(text)
    elapsed = time.perf_counter() - started
    assert [e.keyword for e in errors] == ["pattern"]
    assert elapsed < HANG_GUARD_S


@pytest.mark.parametrize(
    "fmt", ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"]
)
def test_formats_are_fast_on_huge_input(fmt: str) -> None:
    compiled = validator.compile({"type": "string", "format": fmt})
    for text in (
        "a" * (1 << 20),
        "1" * (1 << 20),
        "P" + "1" * (1 << 20) + "D",
        "a@" + "a." * (1 << 19),
    ):
        started = time.perf_counter()
        assert not compiled.is_valid(text)
        assert time.perf_counter() - started < HANG_GUARD_S


def _nested_items(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def _nested_list(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_deep_schemas_are_rejected_cleanly() -> None:
    with pytest.raises(validator.SchemaError) as caught:
        validator.compile(_nested_items(200))
    assert caught.value.issues and caught.value.issues[0].code == "invalid_tool_schema"
    with pytest.raises(validator.SchemaError):
        validator.compile(_nested_items(5000))  # beyond what a recursive walker could take


def test_engine_handles_the_deepest_schema_it_accepts() -> None:
    fast, interp = engine(_nested_items(60))  # past Python's static block limits if inlined
    assert getattr(fast, "__self__", None) is None  # generated code, not the interpreter
    assert fast(_nested_list(60, 1))
    assert not fast(_nested_list(60, "x"))
    assert [e.keyword for e in interp.errors(_nested_list(60, "x"))] == ["type"]


def test_many_anyof_branches() -> None:
    schema = {"anyOf": [{"const": i} for i in range(500)]}
    compiled = validator.compile(schema)
    assert compiled.validate(499) == []
    assert [e.keyword for e in compiled.validate(500)] == ["anyOf"]


RECURSIVE = {
    "type": "object",
    "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["v"],
    "additionalProperties": False,
}


def _tree(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"v": 0, "kids": []}
    for _ in range(depth):
        node = {"v": 0, "kids": [node]}
    return node


def test_recursive_ref_with_deep_data_reports_depth_not_recursionerror() -> None:
    compiled = validator.compile(RECURSIVE)
    assert compiled.validate(_tree(20)) == []
    for depth in (40, 5_000, 50_000):
        errors = compiled.validate(_tree(depth))
        assert [e.keyword for e in errors] == ["depth"]
        assert errors[0].message.endswith(f"exceeds maximum depth {MAX_INSTANCE_DEPTH}")
        # Reported where the cap was hit (not by the RecursionError safety net at the root).
        assert errors[0].pointer.startswith("/kids/0/kids/0/")
        assert MAX_INSTANCE_DEPTH < errors[0].pointer.count("/") <= MAX_INSTANCE_DEPTH + 2
        assert not compiled.is_valid(_tree(depth))


def test_ref_cycles_that_never_descend_are_rejected() -> None:
    for schema in (
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
    ):
        with pytest.raises(validator.SchemaError):
            validator.compile(schema)
        with pytest.raises(BuildError, match="never descends"):
            engine(schema)  # the engine refuses it on its own, not only through lint


def test_validate_never_mutates_schema_or_instance() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
            "b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/n"}]},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
        "$defs": {"n": {"type": "null"}},
    }
    schema_before = copy.deepcopy(schema)
    compiled = validator.compile(schema)
    instances: list[Any] = [{"a": [1, 2], "b": None}, {"a": [1, "x", 3], "b": 5, "c": {}}, [], {}]
    for instance in instances:
        before = copy.deepcopy(instance)
        compiled.validate(instance)
        compiled.is_valid(instance)
        assert instance == before
    assert schema == schema_before


KEYWORDS = [
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
    "minimum",
    "maxLength",
    "multipleOf",
    "not",
    "x",
]


# A named function: Hypothesis reads an ``extend`` lambda's source to check it recurses,
# and misreads one spread over several lines.
def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from([*KEYWORDS, "a"]), inner, max_size=4
    )


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.sampled_from(["string", "object", "#", "#/$defs/a", "^a+$", "date", "(", "integer"]),
    _containers,
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(schema=st.dictionaries(st.sampled_from(KEYWORDS), _values, max_size=5), instance=_values)
def test_arbitrary_schemas_compile_or_raise_schema_error(
    schema: dict[str, Any], instance: Any
) -> None:
    try:
        compiled = validator.compile(schema)
    except validator.SchemaError as exc:
        assert exc.issues and all(i.code == "invalid_tool_schema" for i in exc.issues)
        return
    errors = compiled.validate(instance)
    assert compiled.is_valid(instance) is (errors == [])
    assert all(e.keyword != "schema" for e in errors)
