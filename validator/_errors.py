"""Validation errors: where (JSON pointer), which keyword, and a short stable message.

Messages are written for both a human and a model (they are fed back in the correction
turn), in one style: ``<pointer> must ...`` with the root shown as ``/``::

    /amount_pence must be integer
    /reason must be one of ["damaged", "late", "wrong_item", "other"]
    /order_number must match pattern ^[0-9]{6}$
    / must not have additional property "x"
    /note must be at most 200 characters
    / must have required property "note"
    / is not valid JSON: unexpected character
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["ValidationError", "pointer", "show"]

_MAX_SHOWN = 120  # characters of a schema value quoted in a message
_MAX_ENUM_SHOWN = 20


@dataclass(frozen=True, slots=True)
class ValidationError:
    """One way an instance fails its schema.

    ``pointer`` is a JSON pointer into the instance (``""`` for the root), ``keyword`` the
    schema keyword that failed (``"type"``, ``"required"``, ``"json"``, ...), ``message``
    the short text, e.g. ``/amount_pence must be integer``.
    """

    pointer: str
    keyword: str
    message: str


def pointer(path: Iterable[str | int]) -> str:
    """JSON pointer (RFC 6901) for a path of object keys and array indexes."""
    return "".join(
        "/" + (str(p) if isinstance(p, int) else p.replace("~", "~0").replace("/", "~1"))
        for p in path
    )


def show(value: Any) -> str:
    """A schema value as compact JSON (``", "`` separated), cut to a readable length."""
    try:
        text = _dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def show_enum(values: tuple[Any, ...]) -> str:
    """``["a", "b"]`` for an enum, listing at most ``_MAX_ENUM_SHOWN`` values."""
    shown = [_dumps(v) for v in values[:_MAX_ENUM_SHOWN]]
    if len(values) > _MAX_ENUM_SHOWN:
        shown.append(f"... ({len(values)} values)")
    return "[" + ", ".join(shown) + "]"


def _dumps(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def error(path: Iterable[str | int], keyword: str, text: str) -> ValidationError:
    """Build an error at ``path`` with message ``"<pointer> <text>"``."""
    where = pointer(path)
    return ValidationError(where, keyword, f"{where or '/'} {text}")
