"""Lazy code generation: ``compile_async``/``lint_compile_async`` start on the interpreter
and get generated code on one background thread after their second use;
``compile`` stays eager."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
import pytest

import validator
from validator import _compile, _compiled
from validator._codegen import CodegenError

SCHEMA: dict[str, Any] = {  # strict (lint-clean), so both async paths accept it
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]{6}$"},
        "reason": {"type": "string", "enum": ["damaged", "late", "other"]},
        "amount": {"type": ["integer", "null"], "minimum": 1, "maximum": 500},
        "note": {"type": ["string", "null"], "maxLength": 5},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 2},
        "kids": {"type": "array", "items": {"$ref": "#"}},
        "pick": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["x"]}]},
    },
    "required": ["id", "reason", "amount", "note", "tags", "kids", "pick"],
    "additionalProperties": False,
}
OK: dict[str, Any] = {
    "id": "123456",
    "reason": "late",
    "amount": None,
    "note": None,
    "tags": [],
    "kids": [],
    "pick": 1,
}

INSTANCES: list[Any] = [
    OK,
    {**OK, "amount": 3, "note": "hi", "tags": ["a"], "pick": "x"},
    {**OK, "kids": [OK, {**OK, "kids": [OK]}]},
    {**OK, "id": "12345"},
    {**OK, "reason": "lost"},
    {**OK, "amount": 0},
    {**OK, "amount": 2.5},
    {**OK, "note": "too long"},
    {**OK, "tags": ["a", "", "c"]},
    {**OK, "kids": [{"id": 1}]},
    {**OK, "pick": "y"},
    {**OK, "extra": 1},
    {"reason": "late"},
    [],
    None,
    "123456",
]


def _fresh(tag: str) -> dict[str, Any]:
    """``SCHEMA`` under a key no other compile has used (the title changes nothing else)."""
    return {**SCHEMA, "title": f"{tag}-{uuid.uuid4().hex}"}


def _results(compiled: validator.CompiledSchema, instance: Any) -> tuple[Any, ...]:
    return (
        compiled.is_valid(instance),
        compiled.validate(instance),
        compiled.validate_json(orjson.dumps(instance)),
    )


def _wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


async def _upgraded(compiled: validator.CompiledSchema) -> bool:
    """Whether the generated code takes over within the timeout. Then waits for the
    background job to return: ``compiled_code`` turns True while the job still holds the
    schema and the generated function in its frame for a moment."""
    if not await asyncio.to_thread(_wait_for, lambda: compiled.compiled_code):
        return False
    executor = _compiled._EXECUTOR
    assert executor is not None
    # One worker runs jobs in order: once this no-op has run, the upgrade job has returned.
    await asyncio.wrap_future(executor.submit(lambda: None))
    return True


async def _via_lint_compile(schema: dict[str, Any]) -> validator.CompiledSchema:
    issues, compiled = await validator.lint_compile_async(schema, path="p")
    assert issues == [] and compiled is not None
    return compiled


ASYNC_COMPILERS: list[Callable[[dict[str, Any]], Awaitable[validator.CompiledSchema]]] = [
    validator.compile_async,
    _via_lint_compile,
]


class Gate:
    """Wraps code generation: counts calls, can hold the background thread until released,
    keeps weak references to what it generated."""

    def __init__(self, *, hold: bool = False, refuse: bool = False) -> None:
        self.calls: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done = threading.Event()
        self.generated: list[weakref.ref[Any]] = []
        self.refuse = refuse
        if not hold:
            self.release.set()
        self._real = _compile.generate  # type: ignore[attr-defined]

    def __call__(self, table: Any) -> Any:
        self.calls.append(threading.current_thread().name)
        self.entered.set()
        try:
            assert self.release.wait(30)
            if self.refuse:
                raise CodegenError("refused for the test")
            fast, source = self._real(table)
            self.generated.append(weakref.ref(fast))
            return fast, source
        finally:
            self.done.set()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Gate]]:
    made: list[Gate] = []

    def make(**kw: Any) -> Gate:
        g = Gate(**kw)
        made.append(g)
        monkeypatch.setattr(_compile, "generate", g)  # eager: a synchronous compile's miss
        monkeypatch.setattr(_compiled, "generate", g)  # lazy: the codegen thread, ``_eager``
        return g

    yield make
    for g in made:  # never leave the shared background thread blocked
        g.release.set()


@pytest.fixture
def _restore_size() -> Iterator[None]:
    yield
    validator.configure_cache(_compile.DEFAULT_MAXSIZE)


@pytest.mark.parametrize("compile_async", ASYNC_COMPILERS)
async def test_interpreter_first_then_generated_code_with_identical_results(
    compile_async: Callable[[dict[str, Any]], Awaitable[validator.CompiledSchema]],
    gate: Callable[..., Gate],
) -> None:
    eager = validator.compile(_fresh("eager"))
    assert eager.compiled_code
    expected = [_results(eager, i) for i in INSTANCES]
    assert any(e[0] for e in expected) and not all(e[0] for e in expected)

    g = gate(hold=True)
    lazy = await compile_async(_fresh("lazy"))
    assert not lazy.compiled_code
    # While generation is held, every answer comes from the interpreter.
    assert [_results(lazy, i) for i in INSTANCES] == expected
    assert g.entered.wait(10)
    assert not lazy.compiled_code
    assert g.calls == ["validator-codegen_0"]  # once, on the validator's own thread

    g.release.set()
    assert await _upgraded(lazy)
    assert [_results(lazy, i) for i in INSTANCES] == expected
    assert len(g.calls) == 1  # many uses, one generation


async def test_upgrade_without_hooks() -> None:
    lazy = await validator.compile_async(_fresh("plain"))
    assert not lazy.compiled_code
    assert lazy.is_valid(OK)
    assert not lazy.compiled_code  # one use: nothing queued
    assert lazy.validate(INSTANCES[3])[0].keyword == "pattern"  # the second use
    assert await _upgraded(lazy)
    assert lazy.validate(INSTANCES[3])[0].keyword == "pattern"


@pytest.mark.parametrize("compile_async", ASYNC_COMPILERS)
async def test_schema_used_once_never_gets_code(
    compile_async: Callable[[dict[str, Any]], Awaitable[validator.CompiledSchema]],
    gate: Callable[..., Gate],
) -> None:
    g = gate()
    lazy = await compile_async(_fresh("once"))
    assert lazy.validate_json(b'{"id": "1"}')[0].keyword == "required"
    await asyncio.sleep(0.2)
    assert not lazy.compiled_code
    assert g.calls == []
    assert await compile_async(lazy.schema) is lazy  # a cache hit is not a use either
    await asyncio.sleep(0.05)
    assert g.calls == [] and not lazy.compiled_code


@pytest.mark.usefixtures("_restore_size")
async def test_evicted_lazy_schemas_are_freed_while_queued_or_generating(
    gate: Callable[..., Gate],
) -> None:
    validator.configure_cache(1)
    g = gate(hold=True)
    running = await validator.compile_async(_fresh("running"))
    running.is_valid({})
    running.is_valid({})
    assert g.entered.wait(10)  # the background thread is now inside its generation
    queued = await validator.compile_async(_fresh("queued"))  # evicts ``running``
    queued.is_valid({})
    queued.is_valid({})  # queued behind ``running``
    await validator.compile_async(_fresh("other"))  # evicts ``queued``
    running_ref, queued_ref = weakref.ref(running), weakref.ref(queued)
    gc.disable()
    try:
        del queued
        assert queued_ref() is None  # the queued job does not keep it alive
        del running
        assert running_ref() is None  # nor does the one generating its code
        g.release.set()
        assert await asyncio.to_thread(g.done.wait, 10)
        # Generated for a schema that is gone: its namespace cycle is broken at once.
        assert len(g.generated) == 1
        assert await asyncio.to_thread(_wait_for, lambda: g.generated[0]() is None)
        await asyncio.sleep(0.05)
        assert len(g.calls) == 1  # the queued job found its schema gone: no generation
    finally:
        gc.enable()


async def test_upgraded_schema_is_freed_by_refcounting(gate: Callable[..., Gate]) -> None:
    g = gate()
    lazy = await validator.compile_async(_fresh("freed"))
    lazy.is_valid({})
    lazy.is_valid({})
    assert await _upgraded(lazy)
    fast = g.generated[0]
    assert fast() is not None
    gc.disable()
    try:
        validator.configure_cache(1)
        await validator.compile_async(_fresh("evictor"))
        assert fast() is not None and lazy.is_valid(INSTANCES[0])  # in use: kept
        del lazy
        assert fast() is None  # the swapped-in namespace is cleared with its schema
    finally:
        gc.enable()
        validator.configure_cache(_compile.DEFAULT_MAXSIZE)


async def test_refused_generation_keeps_the_interpreter(gate: Callable[..., Gate]) -> None:
    eager = validator.compile(_fresh("eager"))
    expected = [_results(eager, i) for i in INSTANCES]
    g = gate(refuse=True)
    lazy = await validator.compile_async(_fresh("refused"))
    lazy.is_valid({})
    lazy.is_valid({})
    assert await asyncio.to_thread(g.done.wait, 10)
    await asyncio.sleep(0.05)
    assert not lazy.compiled_code
    assert [_results(lazy, i) for i in INSTANCES] == expected
    assert validator.compile(lazy.schema) is lazy and not lazy.compiled_code
    assert len(g.calls) == 1  # refused once: never retried


def test_sync_compile_is_eager(gate: Callable[..., Gate]) -> None:
    g = gate()
    compiled = validator.compile(_fresh("sync"))
    assert compiled.compiled_code  # before any use
    assert g.calls == [threading.current_thread().name]  # generated right here
    assert compiled.validate(INSTANCES[4])[0].keyword == "enum"
    assert len(g.calls) == 1


async def test_sync_compile_of_a_lazy_entry_generates_its_code_there(
    gate: Callable[..., Gate],
) -> None:
    g = gate()
    schema = _fresh("sync-after-async")
    lazy = await validator.compile_async(schema)
    assert not lazy.compiled_code
    assert validator.compile(schema) is lazy  # the one cached entry...
    assert lazy.compiled_code  # ...now eager for every holder
    assert g.calls == [threading.current_thread().name]
    lazy.is_valid({})
    lazy.is_valid({})
    await asyncio.sleep(0.1)
    assert len(g.calls) == 1  # nothing left to upgrade
    assert lazy.validate(INSTANCES[5])[0].keyword == "minimum"


async def test_validate_json_async_moves_only_large_input_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Generated code validates up to 64 KiB right on the loop; the interpreter (a schema
    from the async paths before its code exists) up to 4 KiB; anything larger goes to a
    worker thread. Same answers either way."""
    threads: list[threading.Thread] = []
    original = validator.CompiledSchema.validate_json

    def recording(self: validator.CompiledSchema, raw: bytes | str) -> Any:
        threads.append(threading.current_thread())
        return original(self, raw)

    monkeypatch.setattr(validator.CompiledSchema, "validate_json", recording)
    kids = [dict(OK, id=f"{i:06d}") for i in range(80)]  # ~8 KiB
    medium = orjson.dumps(dict(OK, kids=kids))
    large = orjson.dumps(dict(OK, kids=kids * 10))  # ~80 KiB
    bad = orjson.dumps(dict(OK, kids=[*kids, dict(OK, id="x")]))
    assert 4096 < len(medium) < 65536 < len(large)

    eager = validator.compile(dict(SCHEMA, title=uuid.uuid4().hex))
    assert eager.compiled_code
    assert await eager.validate_json_async(medium) == []
    assert await eager.validate_json_async(large) == []
    assert [t is threading.main_thread() for t in threads] == [True, False]

    threads.clear()
    issues, lazy = await validator.lint_compile_async(dict(SCHEMA, title=uuid.uuid4().hex))
    assert issues == [] and lazy is not None and not lazy.compiled_code
    assert await lazy.validate_json_async(b'{"id": 1}') != []  # small: here
    # Over 4 KiB: a worker thread (this second use also queues code generation, after
    # which the 64 KiB bound applies).
    errors = await lazy.validate_json_async(bad)
    assert [e.pointer for e in errors] == ["/kids/80/id"]
    assert [t is threading.main_thread() for t in threads] == [True, False]
