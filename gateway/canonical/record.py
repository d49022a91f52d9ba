"""``@record``: an immutable, slotted dataclass whose constructor costs what a plain one does.

``@dataclass(frozen=True)`` enforces immutability at run time by routing every field of
``__init__`` through ``object.__setattr__``, several times the cost of a plain
constructor. The request path builds a dozen such objects per request (the canonical
request, its messages and tools, the response, usage sums, the rate decision), enough to
show in the gateway's CPU per request (figures in ``docs/performance.md``).

``@record`` declares the class frozen to the type checker (PEP 681 ``frozen_default``), so
``mypy --strict`` refuses any assignment to a field, as it does for ``frozen=True``; at run
time the class is ``@dataclass(slots=True, unsafe_hash=True)``: the same fields, ``__eq__``,
``__repr__``, ``__hash__`` (from the fields, as frozen dataclasses get), ``__match_args__``
and ``dataclasses.replace``, without the per-field ``object.__setattr__``. Instances are
treated as immutable by convention and by the type checker; nothing mutates them.

Example::

    @record
    class Usage:
        prompt_tokens: int = 0
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[_T]) -> type[_T]:
    """The class as an immutable-by-type, slotted dataclass (module docstring)."""
    return dataclasses.dataclass(slots=True, unsafe_hash=True)(cls)
