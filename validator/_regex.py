"""Linear-time regular expressions for ``pattern`` (RE2 via google-re2).

JSON Schema ``pattern`` is an ECMA-262 regex applied as an unanchored search. We run it
on RE2, which guarantees time linear in the input, so ``^(a+)+$`` on a 1 MiB string takes
milliseconds instead of forever. Differences between ECMA-262 and RE2
that a schema author may notice, decided here:

- ``\\d`` and ``\\w`` are ASCII in both (no translation needed).
- ``\\s`` is ASCII whitespace in RE2 but Unicode whitespace in ECMA-262.
- ``.`` excludes only ``\\n`` in RE2; ECMA-262 also excludes ``\\r``, U+2028, U+2029.
- ``\\uXXXX`` escapes (ECMA) are translated to RE2's ``\\x{XXXX}``.
- Backreferences, lookahead/lookbehind and ``\\cX`` control escapes are rejected
  (``PatternError``): they cannot run in linear time or RE2 does not have them.
- ``$`` matches only at the very end in both (unlike Python ``re``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import re2  # google-re2

from validator._fastregex import fast_search

__all__ = [
    "MAX_PATTERN_LENGTH",
    "Pattern",
    "PatternError",
    "Searcher",
    "check_pattern",
    "compile_pattern",
    "searcher",
]

Searcher = Callable[[str], Any]
"""``search(text)``: None when the pattern does not occur in ``text``, else a true value."""

# Patterns longer than this are refused outright: they are schema text, and RE2's program
# size is bounded separately by ``max_mem``.
MAX_PATTERN_LENGTH = 10_000
_MAX_MEM = 8 << 20

_HEX = frozenset("0123456789abcdefABCDEF")
_SEARCHERS_MAX = 512
_SEARCHERS: OrderedDict[str, Searcher] = OrderedDict()
_SEARCHERS_LOCK = threading.Lock()


class PatternError(ValueError):
    """A ``pattern`` the linear-time engine cannot take; ``str(exc)`` is a short reason."""


class Pattern(Protocol):
    """The part of a compiled RE2 pattern the validator uses."""

    def search(self, text: str) -> Any: ...


def _options(capture: bool = True) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_MEM
    options.never_capture = not capture
    return options


def _translate(pattern: str) -> str:
    """Rewrite the ECMA-262 escapes RE2 spells differently; refuse ones it lacks."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            raise PatternError("pattern ends with a lone backslash")
        nxt = pattern[i + 1]
        if nxt == "u" and i + 6 <= n and all(c in _HEX for c in pattern[i + 2 : i + 6]):
            out.append("\\x{" + pattern[i + 2 : i + 6] + "}")
            i += 6
            continue
        if nxt == "c":
            raise PatternError("control escapes (\\c) are not supported")
        if nxt.isdigit() and nxt != "0":
            raise PatternError("backreferences are not supported")
        out.append(pattern[i : i + 2])
        i += 2
    return "".join(out)


def compile_pattern(pattern: str) -> Pattern:
    """Compile a JSON Schema ``pattern`` for linear-time unanchored search.

    Raises ``PatternError`` for anything RE2 cannot run (backreferences, lookaround, ...).

    >>> compile_pattern("^[0-9]{6}$").search("123456") is not None
    True
    """
    if not isinstance(pattern, str):
        raise PatternError("pattern must be a string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"pattern is longer than {MAX_PATTERN_LENGTH} characters")
    translated = _translate(pattern)
    try:
        compiled: Pattern = re2.compile(translated, _options())
    except re2.error as exc:
        raise PatternError(_reason(exc)) from exc
    except (TypeError, ValueError) as exc:  # pragma: no cover - defensive
        raise PatternError(str(exc)) from exc
    return compiled


def searcher(pattern: str) -> Searcher:
    """The fastest linear-time ``search`` for ``pattern`` (PatternError if unsupported).

    RE2 decides what is accepted; simple patterns then run on Python ``re`` where
    ``_fastregex`` proves that is linear and equivalent, the rest call RE2 directly.
    Searchers are shared through a small LRU keyed by the pattern text: large schemas
    repeat a few patterns many times, and each searcher is a handful of objects the
    cyclic GC must visit besides two RE2 compilations.
    """
    with _SEARCHERS_LOCK:
        found = _SEARCHERS.get(pattern)
        if found is not None:
            _SEARCHERS.move_to_end(pattern)
            return found
    made = _make_searcher(pattern)  # outside the lock: RE2 compiles can take a while
    with _SEARCHERS_LOCK:
        _SEARCHERS[pattern] = made
        while len(_SEARCHERS) > _SEARCHERS_MAX:
            _SEARCHERS.popitem(last=False)
    return made


def _make_searcher(pattern: str) -> Searcher:
    compiled = compile_pattern(pattern)
    fast = fast_search(pattern)
    if fast is not None:
        return fast
    try:
        program = re2.compile(_translate(pattern), _options(capture=False))
        raw = program._regexp
        unanchored = re2._Anchor.UNANCHORED
        no_match = re2._NULL_SPAN
    except AttributeError:  # pragma: no cover - binding internals moved; public API then
        return compiled.search

    def search(text: str) -> bool | None:
        data = text.encode("utf-8", "surrogatepass")
        return None if raw.Match(unanchored, data, 0, len(data))[0] == no_match else True

    return search


def _reason(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else exc
    text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
    return text or "invalid pattern"


def check_pattern(pattern: str) -> str | None:
    """Return None if ``pattern`` compiles on the linear-time engine, else a short reason."""
    try:
        compile_pattern(pattern)
    except PatternError as exc:
        return str(exc)
    return None
