"""A faster matcher for the simple patterns schemas mostly use, still linear-time.

A call into RE2 through the google-re2 binding costs microseconds (pybind11 overhead),
more than the whole rest of a small schema's validation. For a conservative class of
patterns we can prove that Python's backtracking ``re`` does linear work and gives the
same answer as RE2, and use it instead:

- only literals, ``.``, character classes (``\\d``/``\\w`` and their negations, ASCII via
  ``re.ASCII``, as in RE2 and ECMA-262), greedy repeats of one such atom, ``^`` first and
  ``$`` last (rewritten to ``\\Z``: Python's ``$`` would also match before a final newline);
- no groups, alternation, lazy repeats, inline flags, ``{,n}`` (literal in ECMA/RE2, a
  repeat in Python), ``\\s`` (``\\v`` differs), or other escapes;
- every repeat with a choice (min != max) is followed by the end of the pattern, by ``$``,
  or by a mandatory atom whose characters are disjoint from the repeat's, so giving back a
  character can never let the next atom match: each backtrack step fails in O(1);
- an unbounded repeat requires the leading ``^`` (else each start position costs O(n)).

Anything else returns ``None`` and the caller uses RE2.
"""

from __future__ import annotations

import re
import re._constants as sre  # type: ignore[import-not-found]  # no stubs; stable since 3.11
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Callable
from typing import Any

__all__ = ["fast_search"]

_ASCII = frozenset(range(128))
_DIGITS = frozenset(range(48, 58))
_WORD = _DIGITS | frozenset(range(65, 91)) | frozenset(range(97, 123)) | {95}
_Chars = tuple[frozenset[int], bool]  # (ASCII code points, may match non-ASCII)


def _escapes_ok(pattern: str) -> bool:
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            if i + 1 >= len(pattern):
                return False
            nxt = pattern[i + 1]
            if not (nxt in "dDwW" or (nxt.isascii() and not nxt.isalnum() and nxt != " ")):
                return False
            i += 2
        else:
            i += 1
    return True


def _category(cat: Any) -> _Chars | None:
    if cat is sre.CATEGORY_DIGIT:
        return _DIGITS, False
    if cat is sre.CATEGORY_NOT_DIGIT:
        return _ASCII - _DIGITS, True
    if cat is sre.CATEGORY_WORD:
        return _WORD, False
    if cat is sre.CATEGORY_NOT_WORD:
        return _ASCII - _WORD, True
    return None


def _chars(op: Any, av: Any) -> _Chars | None:
    """The characters a single-character atom matches, or None if not such an atom."""
    if op is sre.LITERAL:
        return (frozenset({av}), False) if av < 128 else (frozenset(), True)
    if op is sre.NOT_LITERAL:
        return _ASCII - {av}, True
    if op is sre.ANY:
        return _ASCII - {10}, True
    if op is not sre.IN:
        return None
    ascii_set: set[int] = set()
    other = False
    negate = False
    for item_op, item_av in av:
        if item_op is sre.NEGATE:
            negate = True
        elif item_op is sre.LITERAL:
            if item_av < 128:
                ascii_set.add(item_av)
            else:
                other = True
        elif item_op is sre.RANGE:
            low, high = item_av
            ascii_set.update(range(low, min(high, 127) + 1))
            other = other or high > 127
        elif item_op is sre.CATEGORY:
            found = _category(item_av)
            if found is None:
                return None
            ascii_set.update(found[0])
            other = other or found[1]
        else:
            return None
    if negate:
        return _ASCII - frozenset(ascii_set), True
    return frozenset(ascii_set), other


def _disjoint(a: _Chars, b: _Chars) -> bool:
    return not (a[0] & b[0]) and not (a[1] and b[1])


def _linear(items: list[tuple[Any, Any]]) -> bool:
    anchored = bool(items) and items[0] == (sre.AT, sre.AT_BEGINNING)
    body = items[1:] if anchored else items
    if body and body[-1] == (sre.AT, sre.AT_END_STRING):
        body = body[:-1]
    elements: list[tuple[int, int, _Chars]] = []
    for op, av in body:
        if op is sre.MAX_REPEAT:
            low, high, sub = av
            if len(sub.data) != 1:
                return False
            chars = _chars(*sub.data[0])
        else:
            low = high = 1
            chars = _chars(op, av)
        if chars is None:
            return False
        elements.append((low, high, chars))
    for index, (low, high, chars) in enumerate(elements):
        if low == high:
            continue
        if high == sre.MAXREPEAT and not anchored:
            return False
        if index + 1 < len(elements):
            next_low, _, next_chars = elements[index + 1]
            if next_low < 1 or not _disjoint(chars, next_chars):
                return False
    return True


def fast_search(pattern: str) -> Callable[[str], Any] | None:
    """A ``search`` equivalent to RE2's for ``pattern``, if provably linear; else None."""
    if any(s in pattern for s in ("(", "|", "{,", "[:", "[[")) or "$" in pattern[:-1]:
        return None
    if not pattern.isascii() or not _escapes_ok(pattern):
        return None
    text = pattern
    if text.endswith("$"):
        rest = text[:-1]
        if (len(rest) - len(rest.rstrip("\\"))) % 2 == 0:  # an unescaped ``$``: the anchor
            text = rest + r"\Z"
    try:
        parsed = sre_parse.parse(text, re.ASCII)
        compiled = re.compile(text, re.ASCII)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    if not _linear(list(parsed.data)):
        return None
    search: Callable[[str], Any] = compiled.search
    return search
