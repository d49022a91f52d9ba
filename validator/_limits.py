"""Per-schema limits (spec: "same as JSON output, counted per tool") and how they are counted.

The first five numbers are OpenAI's published structured-output limits, which the spec
adopts. The rest bound work the compiler and validator do on hostile input; they are
generous for hand-written and generated tool schemas (a 50-property nested schema with
``$defs`` uses well under a tenth of each).

How things are counted (shown by ``lint_report``):

* ``properties``: the sum of ``len(properties)`` over every object schema, ``$defs`` included.
* ``nesting_depth``: object levels; the root object is level 1, each object schema below
  another (through properties, items, anyOf, additionalProperties) adds one. Each ``$defs``
  entry starts again at level 1 (a ``$ref`` is not followed: recursion is allowed).
* ``enum_values``: the sum of ``len(enum)`` over every schema.
* ``string_chars``: characters of property names, definition names, string ``enum`` and
  ``const`` values; a non-string enum or const value counts the length of its JSON text.
* ``large_enum_chars``: the largest total of string characters within one ``enum`` that has
  more than ``large_enum_threshold`` values.
* ``serialized_bytes``: compact UTF-8 JSON (no spaces), as orjson would write it.
* ``anyof_branches``, ``defs``: totals over the schema; ``pattern_length``: the longest one.
* ``schema_depth``: subschema hops of any kind (a hard stop for the walk itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Limits:
    """Numbers a schema must stay within; ``LIMITS`` holds the defaults.

    Example::

        lint(schema)                                   # uses LIMITS
        lint_report(schema, limits=Limits(max_properties=100))
    """

    max_properties: int = 5_000
    max_depth: int = 10
    max_enum_values: int = 1_000
    max_string_chars: int = 120_000
    large_enum_threshold: int = 250
    max_large_enum_chars: int = 15_000
    max_serialized_bytes: int = 256 * 1024
    max_anyof_branches: int = 500
    max_defs: int = 500
    max_pattern_length: int = 1_000
    max_schema_depth: int = 64


LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class LimitCount:
    """One counted quantity beside its limit (``name`` matches the ``Limits`` field suffix)."""

    name: str
    value: int
    limit: int

    @property
    def exceeded(self) -> bool:
        return self.value > self.limit


def serialized_size(value: Any, cap: int) -> int:
    """Bytes of ``value`` as compact JSON, counting stops once past ``cap``.

    Iterative (no recursion) and bounded by ``cap``, so it is safe on any Python value,
    including very deep or self-referencing containers built by a caller.
    """
    try:  # fast path: plain JSON data (orjson refuses cycles, depth > 254, odd types)
        return len(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        pass  # count it ourselves, below
    total = 0
    stack: list[Any] = [value]
    while stack:
        if total > cap:
            return total
        item = stack.pop()
        if isinstance(item, Mapping):
            total += 2 + max(len(item) - 1, 0)  # braces, commas
            for key, sub in item.items():
                total += scalar_size(key if isinstance(key, str) else str(key)) + 1
                stack.append(sub)
        elif isinstance(item, list | tuple):
            total += 2 + max(len(item) - 1, 0)
            stack.extend(item)
        else:
            total += scalar_size(item)
    return total


def scalar_size(value: Any) -> int:
    """Bytes of one JSON scalar; values orjson cannot encode count as their ``repr``."""
    try:
        return len(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        return len(repr(value).encode("utf-8", "replace"))


def value_chars(value: Any, cap: int) -> int:
    """Characters an enum/const value contributes: a string's length, else its JSON text."""
    if isinstance(value, str):
        return len(value)
    return serialized_size(value, cap)
