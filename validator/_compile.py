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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson

from validator._codegen import CodegenError, generate
from validator._dialect import Dialect
from validator._dupkeys import duplicate_key
from validator._errgen import ErrorCodegenError, ErrorsFn, generate_errors
from validator._errors import ValidationError, error, show
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


def _default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def canonical_json(schema: Mapping[str, Any] | bool) -> bytes:
    """The canonical JSON of ``schema`` (sorted keys, no spaces) that ``canonical_key``
    hashes: equal for equal schemas in any key order, so itself a cache key.

    >>> canonical_json({"type": "string", "maxLength": 3})
    b'{"maxLength":3,"type":"string"}'
    """
    try:
        return orjson.dumps(schema, default=_default, option=orjson.OPT_SORT_KEYS)
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        # orjson refuses integers beyond 64 bits (and nesting past 254); the stdlib does not.
        try:
            return json.dumps(
                schema,
                default=_default,
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            ).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            issue = Issue("invalid_tool_schema", "", f"schema is not JSON: {str(exc)[:120]}")
            raise SchemaError([issue]) from exc


def _canonical(schema: Any) -> tuple[str, bytes]:
    text = canonical_json(schema)
    return hashlib.sha256(text).hexdigest(), text


def _load(text: bytes) -> Any:
    # The stdlib keeps big integers exact (orjson would turn them into floats).
    return json.loads(text)


def canonical_key(schema: Mapping[str, Any] | bool) -> str:
    """Cache key of ``schema``: SHA-256 hex of its canonical JSON (sorted keys).

    >>> canonical_key({"type": "string", "maxLength": 3}) == canonical_key(
    ...     {"maxLength": 3, "type": "string"})
    True
    """
    return _canonical(schema)[0]


# ``validate_json_async`` validates input larger than these in a worker thread.
OFFLOAD_CODE_BYTES = 64 * 1024
OFFLOAD_INTERPRETER_BYTES = 4 * 1024


class _Lazy:
    """The interpreter standing in for the generated code of a lazily compiled schema:
    counts uses and queues code generation on the second one."""

    __slots__ = ("interp", "owner", "queued", "table", "uses")

    def __init__(self, table: Table, interp: Interpreter) -> None:
        # The table shares its tuples with the interpreter: keeping it costs nothing extra.
        self.table: Table | None = table
        self.interp = interp
        self.owner: weakref.ref[CompiledSchema] | None = None
        self.uses = 0
        self.queued = False

    def _use(self) -> None:
        uses = self.uses = self.uses + 1
        if uses == 2:
            _queue_upgrade(self)

    def __call__(self, instance: Any) -> bool:
        self._use()
        return self.interp.is_valid(instance)

    def errors(self, instance: Any) -> list[ValidationError]:
        self._use()
        return self.interp.errors(instance)


class _ErrorCode:
    """A schema's generated error collection (``_errgen``): made on the codegen thread
    after its first invalid instance; until then, or if refused, the interpreter reports."""

    __slots__ = ("fn", "namespace", "queued")

    def __init__(self) -> None:
        self.fn: ErrorsFn | None = None
        self.namespace: dict[str, Any] | None = None
        self.queued = False


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class CompiledSchema:
    """A schema ready to validate instances; obtain one from ``compile``.

    >>> c = compile({"type": "object", "properties": {"n": {"type": "integer"}}})
    >>> [e.message for e in c.validate({"n": "1"})]
    ['/n must be integer']
    """

    key: str
    _canonical: bytes
    _fast: Callable[[Any], bool]
    _interp: Interpreter
    _namespace: dict[str, Any] | None = None
    _error_code: _ErrorCode = field(default_factory=_ErrorCode)

    def __copy__(self) -> CompiledSchema:
        return self  # immutable; and a copy must not share (then clear) the namespace

    def __deepcopy__(self, memo: dict[int, Any]) -> CompiledSchema:
        return self

    def __del__(self) -> None:
        # The generated functions and their globals form a reference cycle (they call each
        # other by name), which only the cyclic GC could free. Nothing else holds them, so
        # break it when this object goes: an evicted schema is freed by refcounting at once
        # and never adds to a full collection.
        if self._namespace is not None:
            self._namespace.clear()
        namespace = self._error_code.namespace
        if namespace is not None:
            namespace.clear()

    @property
    def compiled_code(self) -> bool:
        """True when instances are checked by generated code; False while a schema from
        ``compile_async``/``lint_compile_async`` still uses the interpreter (before its
        second use, while its code is being generated, or if generation was refused)."""
        return self._namespace is not None and self._fast.__class__ is not _Lazy

    @property
    def compiled_errors(self) -> bool:
        """True when errors come from generated code; False until the codegen thread has
        made it, which the first invalid instance asks for (the interpreter reports
        meanwhile, with the same errors), or when generation was refused."""
        return self._error_code.fn is not None

    @property
    def schema_bytes(self) -> int:
        """The size of the schema's canonical JSON: what the shared cache's byte bound
        counts (the compiled forms take ~10-20x this in memory)."""
        return len(self._canonical)

    @property
    def canonical_json(self) -> bytes:
        """The schema's canonical JSON (``canonical_json``), held by this object anyway."""
        return self._canonical

    @property
    def schema(self) -> Any:
        """A fresh private copy of the compiled schema (canonical key order)."""
        return _load(self._canonical)

    def is_valid(self, instance: Any) -> bool:
        """True when ``instance`` matches; the fast path only, no error objects built."""
        try:
            return self._fast(instance)
        except RecursionError:
            return self._interp.is_valid(instance)

    def validate(self, instance: Any) -> list[ValidationError]:
        """Every error of ``instance`` (a parsed JSON value), in a stable order; [] if valid."""
        fast = self._fast
        if fast.__class__ is _Lazy:  # one interpreter walk, not a verdict then the errors
            return fast.errors(instance)
        try:
            if fast(instance):
                return []
        except RecursionError:
            pass  # the error walk reports it as a depth error
        explain = self._error_code.fn
        if explain is not None:
            errors = explain(instance)
        else:
            errors = self._interp.errors(instance)
            if not self._error_code.queued:
                _queue_errors(self)
        if not errors:  # pragma: no cover - the two back ends disagree; never accept silently
            return [ValidationError("", "schema", "/ does not match the schema")]
        return errors

    def validate_json(self, raw: bytes | str) -> list[ValidationError]:
        """Parse ``raw`` with orjson and validate it; unparseable input is one ``json`` error,
        and so is an object with a duplicate key (readers disagree on which one wins)."""
        try:
            instance = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return [_json_error(raw, exc)]
        duplicate = duplicate_key(raw, instance)
        if duplicate is not None:
            path, key = duplicate
            return [error(path, "json", f"has duplicate key {show(key)}", "", key)]
        return self.validate(instance)

    async def validate_json_async(self, raw: bytes | str) -> list[ValidationError]:
        """``validate_json``, in a worker thread when it could hold an event loop for
        milliseconds: ``raw`` over 64 KiB, or over 4 KiB while the schema still uses the
        interpreter (a schema from ``compile_async``/``lint_compile_async`` before its
        code is generated, which is several times slower than generated code). Smaller
        input is validated
        right here, with no thread hop."""
        limit = OFFLOAD_CODE_BYTES if self.compiled_code else OFFLOAD_INTERPRETER_BYTES
        if len(raw) <= limit:
            return self.validate_json(raw)
        return await asyncio.to_thread(self.validate_json, raw)


def _json_error(raw: bytes | str, exc: orjson.JSONDecodeError) -> ValidationError:
    """One ``json`` error: orjson's reason, where it stopped (line and column, 1-based),
    and the text around that point as ``value``."""
    reason = str(exc).split(":", 1)[0] or "parse error"
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    pos = min(max(exc.pos, 0), len(text))
    start = max(pos - 20, 0)
    around = text[start : pos + 20]
    around = ("..." if start else "") + around + ("..." if pos + 20 < len(text) else "")
    message = f"/ is not valid JSON: {reason} at line {exc.lineno} column {exc.colno}"
    return ValidationError("", "json", message, "", around)


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


_UPGRADE_LOCK = threading.Lock()
_EXECUTOR: ThreadPoolExecutor | None = None


def _queue_upgrade(stand_in: _Lazy) -> None:
    """Queue code generation for the schema ``stand_in`` serves (once; weakly held)."""
    owner = stand_in.owner
    with _UPGRADE_LOCK:
        if stand_in.queued or owner is None:
            return
        stand_in.queued = True
        executor = _executor()
    executor.submit(_upgrade, owner)


def _executor() -> ThreadPoolExecutor:
    """The one codegen thread, started on first use. Under ``_UPGRADE_LOCK``."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="validator-codegen")
    return _EXECUTOR


def _queue_errors(compiled: CompiledSchema) -> None:
    """Queue error-code generation for ``compiled`` (once; weakly held)."""
    slot = compiled._error_code
    with _UPGRADE_LOCK:
        if slot.queued:
            return
        slot.queued = True
        executor = _executor()
    executor.submit(_make_errors, weakref.ref(compiled))


def _make_errors(ref: weakref.ref[CompiledSchema]) -> None:
    """The background job: generate a schema's error code, if the schema is still alive.
    Holds no strong reference to it while generating (its interpreter's table suffices)."""
    compiled = ref()
    if compiled is None:
        return
    interp, slot = compiled._interp, compiled._error_code
    del compiled
    try:
        fn, namespace, _source = generate_errors(interp.table())
    except (ErrorCodegenError, RecursionError):
        return  # the interpreter keeps reporting
    with _UPGRADE_LOCK:
        owner = ref()
        if owner is not None:
            slot.namespace = namespace  # first: ``__del__`` must find what it clears
            slot.fn = fn
    # Dropped outside the lock: if this was the last reference, ``__del__`` runs here.
    del owner
    if slot.fn is not fn:
        namespace.clear()


def _generate(stand_in: _Lazy) -> Callable[[Any], bool] | None:
    """The generated code for ``stand_in``'s table; None if refused (then never retried:
    the interpreter stays) or if it is no longer needed."""
    table = stand_in.table
    if table is None:
        return None
    try:
        fast, _source = generate(table)
    except (CodegenError, RecursionError):
        stand_in.table = None
        return None
    return fast


def _install(
    ref: weakref.ref[CompiledSchema], stand_in: _Lazy, fast: Callable[[Any], bool]
) -> None:
    """Swap ``fast`` into the schema if it is still alive and still served by ``stand_in``;
    otherwise break the generated code's reference cycle (nobody else will)."""
    namespace: dict[str, Any] = fast.__globals__
    with _UPGRADE_LOCK:
        compiled = ref()
        installed = compiled is not None and compiled._fast is stand_in
        if installed:
            # The namespace first: whoever sees the new ``_fast`` also finds the namespace
            # ``__del__`` must clear. Attribute stores are atomic under the GIL.
            object.__setattr__(compiled, "_namespace", namespace)
            object.__setattr__(compiled, "_fast", fast)
            stand_in.table = None
    # Dropped outside the lock: if this was the last reference, ``__del__`` runs here.
    del compiled
    if not installed:
        namespace.clear()


def _upgrade(ref: weakref.ref[CompiledSchema]) -> None:
    """The background job: generate the code of a lazily compiled schema, if still alive.
    Holds no strong reference to the schema while queued or generating."""
    compiled = ref()
    if compiled is None:
        return
    stand_in = compiled._fast
    del compiled
    if isinstance(stand_in, _Lazy):
        fast = _generate(stand_in)
        if fast is not None:
            _install(ref, stand_in, fast)


def _eager(compiled: CompiledSchema) -> CompiledSchema:
    """``compile``'s answer for a cached entry: generate a lazy entry's code right here
    (then it is eager for every holder). An upgrade queued meanwhile finds nothing to do."""
    stand_in = compiled._fast
    if isinstance(stand_in, _Lazy):
        fast = _generate(stand_in)
        if fast is not None:
            _install(weakref.ref(compiled), stand_in, fast)
    return compiled


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
