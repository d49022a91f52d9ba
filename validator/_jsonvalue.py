"""JSON value semantics shared by both back ends: types, equality, multipleOf.

JSON has one number type: ``1.0`` is an integer, booleans are not numbers, and enum/const
equality is JSON equality (``1 == 1.0``, ``true != 1``, deep over arrays and objects).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

__all__ = ["is_integer", "is_number", "json_equal", "multiple_of", "type_matches"]


def is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def is_integer(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    return isinstance(x, float) and x.is_integer()


def type_matches(name: str, x: Any) -> bool:
    if name == "string":
        return isinstance(x, str)
    if name == "object":
        return isinstance(x, dict)
    if name == "array":
        return isinstance(x, list)
    if name == "null":
        return x is None
    if name == "boolean":
        return isinstance(x, bool)
    if name == "integer":
        return is_integer(x)
    return is_number(x)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of two JSON values (iterative over nesting, so deep values cannot recurse)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, bool) or isinstance(y, bool):
            if not (isinstance(x, bool) and isinstance(y, bool) and x is y):
                return False
        elif is_number(x) or is_number(y):
            if not (is_number(x) and is_number(y) and x == y):
                return False
        elif isinstance(x, str) or isinstance(y, str):
            if not (isinstance(x, str) and isinstance(y, str) and x == y):
                return False
        elif isinstance(x, list) or isinstance(y, list):
            if not (isinstance(x, list) and isinstance(y, list) and len(x) == len(y)):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, dict) or isinstance(y, dict):
            if not (isinstance(x, dict) and isinstance(y, dict) and x.keys() == y.keys()):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif not (x is None and y is None):
            return False
    return True


def _exact(x: int | float) -> Fraction:
    # A float as the decimal it prints as (its shortest round-trip repr), which is what
    # the JSON text said: 0.07 means 7/100, not the binary double nearest to it.
    return Fraction(x) if isinstance(x, int) else Fraction(repr(x))


def multiple_of(x: int | float, m: int | float) -> bool:
    """``x`` is a multiple of ``m``, decided exactly on the decimal values as written.

    Integers use ``%``; anything involving a float compares exact rationals of the
    shortest decimal reprs, so ``0.07`` is a multiple of ``0.01`` and ``0.0075`` of
    ``0.0001`` (plain float division says no to the first; ``jsonschema`` does that).
    """
    if isinstance(x, int) and isinstance(m, int):
        return x % m == 0
    try:
        return (_exact(x) / _exact(m)).denominator == 1
    except (ValueError, OverflowError, ZeroDivisionError):  # inf/nan: not JSON numbers
        return False
