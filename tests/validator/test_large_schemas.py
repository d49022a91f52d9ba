"""Large schemas: split code generation, few GC-tracked objects, no leaks.

A large schema used to become one huge generated function whose ``compile()`` held the
GIL long enough to stall the loop, and thousands of GC-tracked objects that every full
collection walked (figures in ``docs/performance.md``). These tests pin the structure that
fixed it (bounded compile() calls, a bounded object count, evicted schemas freed by
refcounting) and that the split code still decides exactly as the interpreter does. The
event-loop figures themselves are measured end to end in
``tests/security/test_hostile_schemas.py``.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import os
import uuid
import weakref
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import validator
from tests.validator import test_differential as differential
from validator import _codegen, _compile, _regex
from validator._compile import engine
from validator._ir import BuildError, build


def _closed(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


def _leaf_object(i: int) -> dict[str, Any]:
    return _closed(
        {
            "s": {"type": "string", "pattern": f"^[a-z]{{1,{i % 7 + 1}}}[0-9]*$", "maxLength": 64},
            "n": {"type": ["integer", "null"], "minimum": i},
            "e": {"enum": [f"v{i}", "w"]} if i % 10 == 0 else {"type": "boolean"},
        }
    )


def _wide(width: int, tag: str = "") -> dict[str, Any]:
    """Every place a long property list can sit: the root (every other property optional),
    array items, a ``$ref`` target, and beside an open object's additionalProperties."""
    props: dict[str, Any] = {f"p{i}": _leaf_object(i) for i in range(width)}
    props["rows"] = {
        "type": "array",
        "items": _closed({f"r{i}": {"type": "integer"} for i in range(300)}),
    }
    props["link"] = {"$ref": "#/$defs/wide"}
    props["map"] = {
        "type": "object",
        "properties": {f"m{i}": {"type": "string"} for i in range(200)},
        "additionalProperties": {"type": "integer"},
    }
    schema = _closed(props, required=[n for i, n in enumerate(props) if i % 2 == 0])
    schema["$defs"] = {"wide": _closed({f"d{i}": {"type": "string"} for i in range(400)})}
    schema["title"] = tag
    return schema


def _instance(width: int) -> dict[str, Any]:
    value: dict[str, Any] = {
        f"p{i}": {
            "s": "a1" if i % 2 else "b",
            "n": None if i % 3 else i,
            "e": f"v{i}" if i % 10 == 0 else True,
        }
        for i in range(width)
    }
    value["rows"] = [{f"r{i}": i for i in range(300)} for _ in range(2)]
    value["link"] = {f"d{i}": "x" for i in range(400)}
    value["map"] = {"m0": "a", "m199": "b", "extra": 7}
    return value


WIDTH = 1000
SCHEMA = _wide(WIDTH)


def _set(path: tuple[str | int, ...], new: Any) -> Any:
    def edit(instance: dict[str, Any]) -> None:
        target: Any = instance
        for step in path[:-1]:
            target = target[step]
        if new is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = new

    return edit


_DELETE = object()

CASES = [
    ("valid", None, []),
    ("first property", _set(("p0", "n"), -1), ["/p0/n must be >= 0"]),
    ("last property", _set(("p999", "s"), "1"), ["/p999/s must match pattern ^[a-z]{1,6}[0-9]*$"]),
    ("late enum", _set(("p990", "e"), "w2"), ['/p990/e must be one of ["v990", "w"]']),
    ("late optional missing", _set(("p999",), _DELETE), []),
    ("late required missing", _set(("p998",), _DELETE), ['/ must have required property "p998"']),
    ("late extra", _set(("zzz",), 1), ['/ must not have additional property "zzz"']),
    ("array item, late field", _set(("rows", 1, "r299"), "x"), ["/rows/1/r299 must be integer"]),
    ("ref target, late field", _set(("link", "d399"), 3), ["/link/d399 must be string"]),
    ("open object, extra value", _set(("map", "extra"), "7"), ["/map/extra must be integer"]),
    ("open object, late field", _set(("map", "m199"), 1), ["/map/m199 must be string"]),
]


@pytest.fixture(scope="module")
def big() -> tuple[Any, Any, validator.CompiledSchema]:
    fast, interp = engine(SCHEMA)
    return fast, interp, validator.compile(SCHEMA)


@pytest.mark.parametrize(("name", "edit", "messages"), CASES, ids=[c[0] for c in CASES])
def test_split_code_decides_like_the_interpreter(
    big: tuple[Any, Any, validator.CompiledSchema], name: str, edit: Any, messages: list[str]
) -> None:
    fast, interp, compiled = big
    instance = _instance(WIDTH)
    if edit is not None:
        edit(instance)
    assert fast(instance) is (messages == [])
    assert [e.message for e in interp.errors(instance)] == messages
    assert [e.message for e in compiled.validate(instance)] == messages
    assert getattr(fast, "__self__", None) is None  # generated code, not the interpreter


def test_generation_is_split_into_small_compile_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    sources: list[str] = []

    def recording_compile(source: str, *args: Any) -> Any:
        sources.append(source)
        return compile(source, *args)

    monkeypatch.setattr(_codegen, "compile", recording_compile, raising=False)
    _fn, text = _codegen.generate(build(SCHEMA))
    assert "".join(sources) == text + "\n"  # every line compiled, each exactly once
    functions = text.split("\ndef ")
    longest_function = max(f.count("\n") for f in functions)
    longest_batch = max(s.count("\n") for s in sources)
    print(
        f"{len(text)} chars, {len(functions)} functions (longest {longest_function} lines), "
        f"{len(sources)} compile() calls (longest {longest_batch} lines)"
    )
    assert len(sources) > 50
    # The budget, plus one call line per "part" function of a long property list.
    assert longest_function <= 2 * _codegen._FUNCTION_LINES
    assert longest_batch <= max(_codegen._BATCH_LINES, longest_function + 1)


def test_small_schemas_stay_one_compile_call(monkeypatch: pytest.MonkeyPatch) -> None:
    sources: list[str] = []

    def recording_compile(source: str, *args: Any) -> Any:
        sources.append(source)
        return compile(source, *args)

    monkeypatch.setattr(_codegen, "compile", recording_compile, raising=False)
    _codegen.generate(build(_leaf_object(3)))
    _codegen.generate(build(_closed({f"f{i}": {"type": "string"} for i in range(40)})))
    assert len(sources) == 2
    assert all(s.count("def ") == 1 for s in sources)  # one function (the root is is_valid)


def _tracked() -> int:
    for _ in range(3):  # nested tuples are untracked one level per pass
        gc.collect()
    return len(gc.get_objects())


def test_a_cached_large_schema_adds_few_gc_tracked_objects() -> None:
    schema = _wide(WIDTH, tag=uuid.uuid4().hex)
    before = _tracked()
    compiled = validator.compile(schema)
    added = _tracked() - before
    print(
        f"GC-tracked objects added by one cached {len(compiled.schema['properties'])}-property "
        f"schema: {added}"
    )
    # One Node, one frozenset, closure cells... per subschema came to ~12,600 for the
    # security test's 240 KiB schema; now: the generated functions and a few constants.
    assert added < 1_500
    assert compiled.is_valid(_instance(WIDTH))


@pytest.fixture
def _small_cache() -> Iterator[None]:
    yield
    validator.configure_cache(_compile.DEFAULT_MAXSIZE, max_bytes=validator.DEFAULT_CACHE_MAX_BYTES)


RECURSIVE: dict[str, Any] = {
    "type": "object",
    "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}, "v": {"type": "string"}},
}


@pytest.mark.usefixtures("_small_cache")
def test_evicted_schemas_are_freed_by_refcounting_alone() -> None:
    """Generated functions and their namespace are a cycle (recursive schemas call
    themselves by name); dropping the CompiledSchema must break it without the GC."""
    validator.configure_cache(1)
    compiled = validator.compile({**RECURSIVE, "title": uuid.uuid4().hex})
    assert compiled.is_valid({"kids": [{"kids": [], "v": "a"}]})
    assert not compiled.is_valid({"kids": [{"v": 1}]})
    fast = weakref.ref(compiled._fast)
    gc.disable()
    try:
        validator.compile({**RECURSIVE, "title": uuid.uuid4().hex})  # evicts it
        assert fast() is not None  # still in use by this test: nothing cleared under it
        assert compiled.is_valid({"kids": []})
        del compiled
        assert fast() is None
    finally:
        gc.enable()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.usefixtures("_small_cache")
def test_memory_stays_bounded_over_thousands_of_evictions() -> None:
    validator.configure_cache(64)
    run = uuid.uuid4().hex

    def compile_many(start: int, stop: int) -> None:
        for i in range(start, stop):
            # Recursive (so the generated code is a cycle), every third with a new pattern
            # (1,000 in all, past the shared searcher cache's bound).
            code = {"type": "string", "pattern": f"^x{i}[a-f]+$" if i % 3 == 0 else "^x"}
            schema = {
                **RECURSIVE,
                "title": f"{run}-{i}",
                "properties": {**RECURSIVE["properties"], "code": code},
            }
            assert validator.compile(schema).is_valid({"code": f"x{i}ab", "kids": [{}]})

    for j in range(_regex._SEARCHERS_MAX):  # fill the bounded caches first
        _regex.searcher(f"^{run}{j}[a-f]+$")
    compile_many(0, 600)
    objects, rss = _tracked(), _rss()
    compile_many(600, 3_000)
    grown_objects, grown_rss = _tracked() - objects, _rss() - rss
    print(
        f"after 2,400 more distinct schemas (cache 64): {grown_objects:+} GC-tracked "
        f"objects, {grown_rss / 1e6:+.1f} MB RSS"
    )
    assert validator.cache_stats().size == 64
    assert len(_regex._SEARCHERS) <= _regex._SEARCHERS_MAX
    assert grown_objects < 500
    assert grown_rss < 16e6


def test_copies_are_the_same_object_so_no_copy_clears_shared_code() -> None:
    compiled = validator.compile({**RECURSIVE, "title": uuid.uuid4().hex})
    assert copy.copy(compiled) is compiled
    assert copy.deepcopy({"c": compiled})["c"] is compiled
    assert compiled.is_valid({"kids": [{"v": "a"}]})


@contextlib.contextmanager
def _split_everything() -> Iterator[None]:
    """Budgets of one line: every property and child becomes its own function, every
    function its own compile() call, so small schemas take the large-schema paths."""
    with (
        mock.patch.object(_codegen, "_FUNCTION_LINES", 1),
        mock.patch.object(_codegen, "_BATCH_LINES", 1),
    ):
        yield


def test_fully_split_code_passes_the_conformance_suite() -> None:
    from tests.validator.test_conformance import GROUPS

    if not GROUPS:
        pytest.skip("JSON Schema Test Suite not found")
    wrong: list[str] = []
    decided = 0
    with _split_everything():
        for group in GROUPS:
            if group.file == "format.json":
                continue  # annotation-only there; asserted formats come from optional/format
            try:
                fast, _interp = engine(group.schema)
            except BuildError:
                continue
            for case in group.tests:
                decided += 1
                if fast(case["data"]) is not case["valid"]:
                    wrong.append(f"{group.file}: {group.description} / {case['description']}")
    assert decided > 700
    assert wrong == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), schema=st.one_of(differential.schemas, differential.recursive_schema()))
def test_fully_split_code_agrees_with_the_interpreter(
    data: st.DataObject, schema: dict[str, Any]
) -> None:
    instance = data.draw(differential.near(schema, schema))
    with _split_everything():
        fast, interp = engine(schema)
    assert fast(instance) is (interp.errors(instance) == []), (schema, instance)


def _nullable_wide(n: int) -> dict[str, Any]:
    props = {f"p{i}": {"type": ["string", "null"], "maxLength": 20 + i % 7} for i in range(n)}
    return {
        "type": "object",
        "title": uuid.uuid4().hex,
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


@pytest.mark.usefixtures("_small_cache")
def test_large_schemas_are_bounded_by_bytes_not_only_by_count() -> None:
    """Hostile input: many distinct large schemas (~85 KiB, ~2 MB compiled each). The count
    bound alone would keep all 30; the byte bound keeps a few."""
    validator.configure_cache(1024, max_bytes=512 * 1024)
    rss = _rss()
    for _ in range(30):
        compiled = validator.compile(_nullable_wide(1500))
        assert compiled.is_valid(dict.fromkeys(compiled.schema["properties"]))
    grown = _rss() - rss
    stats = validator.cache_stats()
    print(
        f"30 schemas of {compiled.schema_bytes} bytes: {stats.size} kept, {grown / 1e6:+.1f} MB RSS"
    )
    assert stats.bytes <= 512 * 1024 and stats.size < 30
    assert grown < 35e6
