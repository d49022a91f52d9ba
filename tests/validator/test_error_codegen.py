"""Errors from generated code: a schema's first invalid instance asks the codegen thread for
its error code, which then reports (``compiled_errors``) with exactly the interpreter's
errors: pointers, keywords, messages, schema paths and offending values, over the tests'
real-schema corpus."""

from __future__ import annotations

import gc
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

import pytest

import validator
from tests.validator.corpus import corpus_schemas, mutants, sample
from validator import _compiled
from validator._errgen import generate_errors

_MAX_SCHEMA_BYTES = 32 * 1024  # the largest schemas are the large-schema tests' business


def _wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _generated(compiled: validator.CompiledSchema) -> bool:
    """Wait for ``compiled``'s error code (True once it reports errors)."""
    return _wait_for(lambda: compiled.compiled_errors)


def _compiled_corpus() -> list[tuple[validator.CompiledSchema, list[Any]]]:
    out = []
    for schema in corpus_schemas():
        fresh = {**schema, "title": f"errgen-{uuid.uuid4().hex}"}  # a key no test shares
        try:
            compiled = validator.compile(fresh)
        except (validator.SchemaError, TypeError, ValueError):
            continue
        if compiled.schema_bytes > _MAX_SCHEMA_BYTES:
            continue
        valid = sample(schema, schema)
        out.append((compiled, [valid, *mutants(schema, valid)]))
    return out


def _seen(errors: list[validator.ValidationError]) -> list[tuple[Any, ...]]:
    return [(e.pointer, e.keyword, e.message, e.schema_path, e.value) for e in errors]


def test_generated_errors_are_the_interpreters_over_the_corpus() -> None:
    validator.configure_cache(4096, max_bytes=64 << 20)
    try:
        corpus = _compiled_corpus()
        assert len(corpus) > 500
        before = []
        for compiled, instances in corpus:
            assert not compiled.compiled_errors
            before.append([_seen(compiled.validate(i)) for i in instances])
        asked = [c for (c, _), seen in zip(corpus, before, strict=True) if any(seen)]
        assert len(asked) > 500
        assert _wait_for(lambda: all(c.compiled_errors for c in asked))
        checked = 0
        for (compiled, instances), seen in zip(corpus, before, strict=True):
            if not any(seen):
                assert not compiled.compiled_errors  # never invalid: never asked
                continue
            after = [_seen(compiled.validate(i)) for i in instances]
            assert after == seen, compiled.schema
            checked += sum(1 for s in seen if s)
        assert checked > 3000
    finally:
        validator.configure_cache(1024, max_bytes=validator.DEFAULT_CACHE_MAX_BYTES)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 1},
        "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 1},
        "pick": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["x"]}]},
    },
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("instance", "messages"),
    [
        ({"n": 0}, ["/n must be >= 1"]),
        (
            {"n": 1, "kids": [{"n": 1, "kids": [{}]}]},
            ['/kids/0/kids/0 must have required property "n"'],
        ),
        ({"n": 1, "pick": "y"}, ['/pick must be one of ["x"]']),
        (
            {"n": 1, "kids": [{"n": 1}, {"n": 2}], "z": 1},
            ["/kids must have at most 1 item", '/ must not have additional property "z"'],
        ),
    ],
)
def test_errors_stay_the_same_once_generated(instance: Any, messages: list[str]) -> None:
    compiled = validator.compile({**SCHEMA, "title": uuid.uuid4().hex})
    first = compiled.validate(instance)
    assert sorted(e.message for e in first) == sorted(messages)
    assert _wait_for(lambda: compiled.compiled_errors)
    assert compiled.validate(instance) == first
    assert [e.value for e in compiled.validate(instance)] == [e.value for e in first]


def test_a_valid_instance_asks_for_no_error_code() -> None:
    compiled = validator.compile({**SCHEMA, "title": uuid.uuid4().hex})
    assert compiled.validate({"n": 1}) == []
    later = validator.compile({**SCHEMA, "title": uuid.uuid4().hex})
    later.validate({"n": 0})  # queued after anything the first would have queued
    assert _wait_for(lambda: later.compiled_errors)
    assert not compiled.compiled_errors


def test_an_evicted_schema_with_error_code_is_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[weakref.ref[Any]] = []
    real = generate_errors

    def recording(table: Any) -> Any:
        fn, namespace, source = real(table)
        made.append(weakref.ref(fn))
        return fn, namespace, source

    monkeypatch.setattr(_compiled, "generate_errors", recording)
    validator.configure_cache(1)
    try:
        compiled = validator.compile({**SCHEMA, "title": uuid.uuid4().hex})
        compiled.validate({"n": 0})
        assert _generated(compiled)
        validator.compile({"type": "string", "title": uuid.uuid4().hex})  # evicts it
        gc.disable()  # freed by reference counting alone: no cycle is left behind
        try:
            assert made[0]() is not None  # still held by its schema
            del compiled
            assert made[0]() is None  # the generated functions went with it
        finally:
            gc.enable()
    finally:
        validator.configure_cache(1024)
