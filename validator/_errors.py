"""Validation errors: where (JSON pointer), which keyword, a short stable message, the
failing keyword's place in the schema and the offending value, cut short.

Messages are written for both a human and a model (they are fed back in the correction
turn), in one style: ``<pointer> must ...`` with the root shown as ``/``::

    /amount_pence must be integer
    /reason must be one of ["damaged", "late", "wrong_item", "other"]
    /order_number must match pattern ^[0-9]{6}$
    / must not have additional property "x"
    /note must be at most 200 characters
    /tags must have at least 1 item
    / must have required property "note"
    / is not valid JSON: unexpected character at line 3 column 7
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ValidationError", "plural", "pointer", "preview", "show"]

_MAX_SHOWN = 120  # characters of a schema value quoted in a message
_MAX_ENUM_SHOWN = 20
_MAX_PREVIEW = 80  # characters of the offending value in ``ValidationError.value``


@dataclass(frozen=True, slots=True)
class ValidationError:
    """One way an instance fails its schema.

    ``pointer`` is a JSON pointer into the instance (``""`` for the root), ``keyword`` the
    schema keyword that failed (``"type"``, ``"required"``, ``"json"``, ...), ``message``
    the short text, e.g. ``/amount_pence must be integer``. ``schema_path`` is a JSON
    pointer to that keyword in the schema, through the ``$ref`` it followed
    (``/$defs/Line/properties/qty/minimum``; ``""`` for a ``json`` error). ``instance`` is
    the offending value itself (for a ``json`` error: the text around where parsing
    stopped, or the duplicated key), and ``value`` shows it as compact JSON cut to 80
    characters (computed when read: errors a caller never shows cost nothing for it).
    """

    pointer: str
    keyword: str
    message: str
    schema_path: str = ""
    instance: Any = field(default=None, repr=False, compare=False)

    @property
    def value(self) -> str:
        """``instance`` as compact JSON, at most 80 characters (``...`` marks a cut)."""
        return preview(self.instance)


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


def preview(value: Any) -> str:
    """``value`` as compact JSON, cut to ``_MAX_PREVIEW`` characters (``...`` marks a cut).
    Bounded work whatever the value's size or depth: it stops writing at the limit."""
    if value is None or isinstance(value, bool | int | float):
        text = _scalar(value)
    elif isinstance(value, str):
        text = _scalar(value[: _MAX_PREVIEW + 1])
    else:
        parts: list[str] = []
        _walk(value, 0, parts, [_MAX_PREVIEW + 1])
        text = "".join(parts)
    return text if len(text) <= _MAX_PREVIEW else text[: _MAX_PREVIEW - 3] + "..."


_PREVIEW_DEPTH = 8


def _walk(value: Any, depth: int, parts: list[str], room: list[int]) -> None:
    """Append ``value``'s compact JSON to ``parts`` until ``room[0]`` characters are used."""
    if room[0] <= 0:
        return
    if isinstance(value, dict | list) and depth >= _PREVIEW_DEPTH:
        text = "{...}" if isinstance(value, dict) else "[...]"
    elif isinstance(value, dict):
        _emit("{", parts, room)
        for i, (key, member) in enumerate(value.items()):
            if room[0] <= 0:
                return
            _emit((", " if i else "") + _scalar(key) + ": ", parts, room)
            _walk(member, depth + 1, parts, room)
        text = "}"
    elif isinstance(value, list):
        _emit("[", parts, room)
        for i, member in enumerate(value):
            if room[0] <= 0:
                return
            if i:
                _emit(", ", parts, room)
            _walk(member, depth + 1, parts, room)
        text = "]"
    else:
        text = _scalar(value[: _MAX_PREVIEW + 1] if isinstance(value, str) else value)
    _emit(text, parts, room)


def _emit(text: str, parts: list[str], room: list[int]) -> None:
    parts.append(text[: room[0]])
    room[0] -= len(text)


def _scalar(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)[:_MAX_PREVIEW]


def plural(count: int | float, noun: str) -> str:
    """``1 character``, ``2 characters``."""
    return f"{show(count)} {noun}" if count == 1 else f"{show(count)} {noun}s"


def error(
    path: Iterable[str | int], keyword: str, text: str, schema_path: str = "", value: Any = None
) -> ValidationError:
    """Build an error at ``path`` with message ``"<pointer> <text>"``."""
    where = pointer(path)
    return ValidationError(where, keyword, f"{where or '/'} {text}", schema_path, value)
