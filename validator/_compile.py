"""``compile``: schema -> ``CompiledSchema``, through one shared, bounded LRU cache.

The cache key is a SHA-256 of the schema's canonical JSON (orjson, sorted keys), so key
order does not matter; the compiled object keeps that canonical text as its private copy
of the schema (the caller's object is never kept or mutated). Concurrent first requests
for one new schema compile it once (single-flight), from threads and from asyncio tasks;
``compile_async`` does the work in a worker thread so the event loop is not blocked.

Lazy code generation: ``compile`` builds both back ends at once (the generated
``is_valid`` and the interpreter). ``compile_async`` and ``lint_compile_async`` (the
gateway's path, where many schemas are seen once) build only the node table and the
interpreter (far cheaper to build, slower per validation). Such a schema validates
with the interpreter and counts its uses (``is_valid``/``validate``/``validate_json``); on
the second use it queues code generation on one validator-owned background thread
(``validator-codegen``), at most once per schema, and swaps the generated function in when
it is ready (``CompiledSchema.compiled_code`` turns True). The queued job holds only a weak
reference to the schema, so an evicted schema is freed at once; if generation is refused
(``CodegenError``) the interpreter stays. Results are identical either way. A synchronous
``compile`` that returns a still-lazy cached entry generates its code there and then, so
``compile`` always returns a schema with generated code (when generation is possible).

Errors from generated code: a schema's first invalid instance (past the verdict) queues
the generation of its error code (``_errgen``) on the same thread, once; until it is
swapped in (``CompiledSchema.compiled_errors``) the interpreter reports, with the same
errors. So ``compile`` pays nothing for it and a schema that is never invalid never
generates it.

Computing the key costs a serialization + hash of the whole schema: callers on a hot path
(the gateway) should keep the ``CompiledSchema`` (or its ``key``) next to the request's
tool definition instead of calling ``compile`` per validation.

This module holds the cache and the ``compile`` entry points; canonical JSON and keys are
in ``_canonical``, ``CompiledSchema`` and the codegen thread in ``_compiled``.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from validator._canonical import _canonical, _load, canonical_json, canonical_key
from validator._codegen import CodegenError, generate
from validator._compiled import CompiledSchema, _eager, _Lazy
from validator._dialect import Dialect
from validator._interp import Interpreter
from validator._ir import BuildError, Table, build
from validator._issues import Issue, SchemaError

__all__ = [
    "CacheStats",
    "CompiledSchema",
    "cache_stats",
    "canonical_json",
    "canonical_key",
    "compile",
    "compile_async",
    "configure_cache",
]

DEFAULT_MAXSIZE = 1024
# The cache's second bound: the canonical JSON bytes of the schemas it holds. A compiled
# schema takes ~10x its canonical size in memory on the interpreter and ~20x with generated
# code (a 240 KiB, 3,800-property schema: 2.3 / 4.6 MB), so 1,024 of the largest schemas
# the lint admits would hold ~5 GB; this bound keeps the worst case near 80-160 MB while
# 1,024 typical tool schemas (a few KiB each) fit under it.
DEFAULT_CACHE_MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters of the shared compiled-schema cache (exported by the gateway as metrics)."""

    hits: int
    misses: int
    evictions: int
    size: int
    maxsize: int
    bytes: int = 0  # canonical schema bytes held (``CompiledSchema.schema_bytes``)
    max_bytes: int = DEFAULT_CACHE_MAX_BYTES


class _Cache:
    def __init__(self, maxsize: int, max_bytes: int = DEFAULT_CACHE_MAX_BYTES) -> None:
        self.lock = threading.Lock()
        self.data: OrderedDict[str, CompiledSchema] = OrderedDict()
        self.inflight: dict[str, Future[CompiledSchema]] = {}
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = self.evictions = 0

    def _evict(self) -> None:
        """Drop least recently used entries until both bounds hold; the newest entry stays
        even if it alone is over ``max_bytes`` (its caller holds it anyway). Under the lock."""
        data = self.data
        while len(data) > self.maxsize or (self.bytes > self.max_bytes and len(data) > 1):
            _key, old = data.popitem(last=False)
            self.bytes -= len(old._canonical)
            self.evictions += 1

    def claim(self, key: str) -> tuple[CompiledSchema | None, Future[CompiledSchema], bool]:
        """(cached, future, owner): a hit, or the flight to wait on / to complete."""
        with self.lock:
            found = self.data.get(key)
            if found is not None:
                self.data.move_to_end(key)
                self.hits += 1
                return found, Future(), False
            flight = self.inflight.get(key)
            if flight is not None:
                self.hits += 1
                return None, flight, False
            self.misses += 1
            flight = Future()
            self.inflight[key] = flight
            return None, flight, True

    def complete(
        self,
        key: str,
        text: bytes,
        flight: Future[CompiledSchema],
        *,
        linted: bool = False,
        lazy: bool = False,
    ) -> None:
        try:
            compiled = _build(key, text, linted=linted, lazy=lazy)
        except BaseException as exc:
            with self.lock:
                self.inflight.pop(key, None)
            flight.set_exception(exc)
            raise
        with self.lock:
            self.inflight.pop(key, None)
            replaced = self.data.pop(key, None)
            if replaced is not None:  # pragma: no cover - one flight per key at a time
                self.bytes -= len(replaced._canonical)
            self.data[key] = compiled
            self.bytes += len(text)
            self._evict()
        flight.set_result(compiled)

    def resize(self, maxsize: int, max_bytes: int) -> None:
        with self.lock:
            self.maxsize = maxsize
            self.max_bytes = max_bytes
            self._evict()

    def stats(self) -> CacheStats:
        with self.lock:
            return CacheStats(
                self.hits,
                self.misses,
                self.evictions,
                len(self.data),
                self.maxsize,
                self.bytes,
                self.max_bytes,
            )


_CACHE = _Cache(DEFAULT_MAXSIZE)


def _subset_issues(schema: Any) -> list[Issue]:
    from validator._lint import subset_issues  # the lint module imports the engine's helpers

    return subset_issues(schema, path="")


def engine(schema: Any) -> tuple[Callable[[Any], bool], Interpreter]:
    """Both back ends for ``schema``, without lint or cache (BuildError if refused)."""
    fast, interp, _namespace = _engine(build(schema))
    return fast, interp


def _engine(nodes: Table) -> tuple[Callable[[Any], bool], Interpreter, dict[str, Any] | None]:
    """Both back ends for a node table, and the generated code's namespace (None when the
    interpreter is used)."""
    interp = Interpreter(nodes)
    try:
        fast, _source = generate(nodes)
    except CodegenError:
        return interp.is_valid, interp, None
    namespace: dict[str, Any] = fast.__globals__
    return fast, interp, namespace


def _build(key: str, text: bytes, *, linted: bool = False, lazy: bool = False) -> CompiledSchema:
    # ``linted``: the caller's full ``lint`` found nothing, which includes every subset
    # issue, so the subset walk is not repeated (the IR still refuses on its own).
    # ``lazy``: the interpreter only; code generation waits for a second use.
    try:
        schema = _load(text)
        issues = [] if linted else _subset_issues(schema)
    except RecursionError as exc:  # defence in depth: lint's walk bounds itself
        issue = Issue("invalid_tool_schema", "", "schema is nested too deeply")
        raise SchemaError([issue]) from exc
    if issues:
        raise SchemaError(issues)
    try:
        nodes = build(schema)
        # The node table holds every value it needs: drop the private copy of the schema
        # (thousands of containers for a large one) before the longer code generation.
        del schema
        if lazy:
            stand_in = _Lazy(nodes, Interpreter(nodes))
            compiled = CompiledSchema(key, text, stand_in, stand_in.interp)
            stand_in.owner = weakref.ref(compiled)
            return compiled
        fast, interp, namespace = _engine(nodes)
    except BuildError as exc:
        raise SchemaError([Issue("invalid_tool_schema", exc.param, exc.message)]) from exc
    except RecursionError as exc:  # pragma: no cover - build bounds its own recursion
        issue = Issue("invalid_tool_schema", "", "schema is nested too deeply")
        raise SchemaError([issue]) from exc
    return CompiledSchema(key, text, fast, interp, namespace)


def compile(schema: Mapping[str, Any] | bool) -> CompiledSchema:
    """Compile ``schema`` (or return the cached compilation). Raises ``SchemaError``.

    Accepts any schema inside the supported keyword subset, strict or not; anything
    outside raises ``SchemaError`` with ``invalid_tool_schema`` issues.
    """
    key, text = _canonical(schema)
    cached, flight, owner = _CACHE.claim(key)
    if cached is not None:
        return _eager(cached) if cached._fast.__class__ is _Lazy else cached
    if owner:
        _CACHE.complete(key, text, flight)
    return _eager(flight.result())


async def compile_async(schema: Mapping[str, Any] | bool) -> CompiledSchema:
    """Like ``compile``, but a cache miss compiles in a worker thread, off the event loop;
    concurrent callers (tasks or threads) wait for the one compilation in flight."""
    key, text = _canonical(schema)
    cached, flight, owner = _CACHE.claim(key)
    if cached is not None:
        return cached
    if owner:
        loop = asyncio.get_running_loop()
        task = loop.run_in_executor(None, _complete_quietly, key, text, flight)
        await asyncio.shield(task)
    return await asyncio.wrap_future(flight)


def _lint_then_compile(
    schema: Any, path: str, dialect: Dialect, local: bool
) -> tuple[list[Issue], CompiledSchema | None]:
    from validator._lint import lint  # the lint module imports the engine's helpers

    issues = lint(schema, path=path, dialect=dialect, enforced_locally=local)
    if issues:
        return issues, None
    key, text = _canonical(schema)
    cached, flight, owner = _CACHE.claim(key)
    if cached is not None:
        return [], cached
    if owner:
        _CACHE.complete(key, text, flight, linted=True, lazy=True)
    return [], flight.result()


async def lint_compile_async(
    schema: Mapping[str, Any] | bool,
    *,
    path: str = "",
    dialect: Dialect = "openai",
    enforced_locally: bool = False,
) -> tuple[list[Issue], CompiledSchema | None]:
    """``lint`` and, when it finds nothing, ``compile``: one lint walk (compile's own
    subset check is covered by it), all in a worker thread, through the shared cache.
    ``enforced_locally`` as for ``lint``.

    Returns ``(issues, None)`` for a schema with issues, else ``([], compiled)``; raises
    ``SchemaError`` only if the engine refuses what lint accepted.

    >>> issues, compiled = await lint_compile_async(schema, path="tools[0].function.parameters")
    """
    return await asyncio.to_thread(_lint_then_compile, schema, path, dialect, enforced_locally)


def _complete_quietly(key: str, text: bytes, flight: Future[CompiledSchema]) -> None:
    # The outcome (result or SchemaError) travels through ``flight``.
    try:
        _CACHE.complete(key, text, flight, lazy=True)
    except Exception:
        return


def cache_stats() -> CacheStats:
    """Current hit/miss/eviction counters and size of the shared cache."""
    return _CACHE.stats()


def configure_cache(maxsize: int | None = None, *, max_bytes: int | None = None) -> None:
    """Set the shared cache's bounds: at most ``maxsize`` schemas, and at most ``max_bytes``
    of their canonical JSON (``CompiledSchema.schema_bytes``; default
    ``DEFAULT_CACHE_MAX_BYTES``), evicting least recently used entries if needed. A bound
    given as None stays as it is. The newest entry is kept even when it alone is larger
    than ``max_bytes``."""
    if maxsize is not None and maxsize < 1:
        raise ValueError("maxsize must be at least 1")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError("max_bytes must be at least 1")
    _CACHE.resize(
        _CACHE.maxsize if maxsize is None else maxsize,
        _CACHE.max_bytes if max_bytes is None else max_bytes,
    )
