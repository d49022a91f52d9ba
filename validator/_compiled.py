"""``CompiledSchema`` and its background upgrade to generated code, apart from the cache."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson

from validator._canonical import _load
from validator._codegen import CodegenError, generate
from validator._dupkeys import duplicate_key
from validator._errgen import ErrorCodegenError, ErrorsFn, generate_errors
from validator._errors import ValidationError, error, show
from validator._interp import Interpreter
from validator._ir import Table

__all__ = ["CompiledSchema"]

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
