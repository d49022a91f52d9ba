"""What one request carries beyond the canonical model, noted by its decoder against the
field policy (``gateway.dialects.policy``): the fields each upstream gets, translated,
dropped with notice or refused, as one ``Screen`` per target.

Example::

    notes = Notes("chat")
    notes.top({"model": "m", "messages": [], "prompt_cache_key": "k"})
    notes.screens()["messages"].dropped  # ('prompt_cache_key',)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gateway.canonical import Header, Screen, Target, Wire
from gateway.dialects.fields import At, spell
from gateway.dialects.policy import MAX_NOTES, RULES, RULES_BY_KEY, TARGETS, WIRE_NAMES, Rule
from gateway.errors import InvalidRequest

__all__ = ["Notes"]


def _noticed(r: Rule) -> bool:
    return r.always != "honoured"


# Per dialect: top-level field -> rule, only for fields that need a note (a field that is
# honoured everywhere costs one set lookup per request).
_TOP_HONOURED: Mapping[str, frozenset[str]] = {
    d: frozenset(r.field for r in RULES if r.dialect == d and not _noticed(r))
    for d in ("chat", "responses", "messages")
}


@dataclass(slots=True)
class _Seen:
    rule: Rule | None  # None: a field the table does not know
    param: str
    value: Any


class Notes:
    """What one request carries beyond the canonical model, as its decoder finds it."""

    __slots__ = ("dialect", "seen")

    def __init__(self, dialect: Wire) -> None:
        self.dialect: Wire = dialect
        self.seen: list[_Seen] = []

    def field(self, name: str, value: Any, param: At | None = None) -> None:
        """``name`` (a table field) is present with ``value``; raises 400 now when every
        upstream refuses it. ``param``: where, in the client's spelling (default ``name``;
        spelled out only when the field is noted)."""
        r = RULES_BY_KEY[(self.dialect, name)]
        if value is None or (r.neutral and _is_neutral(value, r.neutral)):
            return
        if r.always == "refused":
            raise _refusal(name if param is None else spell(param), r, None)
        if _noticed(r):
            self.seen.append(_Seen(r, name if param is None else spell(param), value))

    def unknown(self, param: At) -> None:
        """A field the table does not know, at ``param``."""
        if len(self.seen) < MAX_NOTES:
            self.seen.append(_Seen(None, spell(param), None))

    def unknown_keys(
        self,
        obj: Mapping[str, Any],
        known: frozenset[str],
        prefix: str,
        *,
        fields: frozenset[str] = frozenset(),
        at: At | None = None,
        nulls: bool = False,
    ) -> None:
        """Keys of ``obj`` outside ``known``: a table field ``{prefix}.{key}`` for those in
        ``fields`` (noted at ``at``), the rest unknown (``{prefix}.{key}``); ``nulls``: a
        ``null`` value counts as absent (the Responses API's reading)."""
        if known.issuperset(obj):
            return
        for key, value in obj.items():
            if key in known or (nulls and value is None):
                continue
            if key in fields:
                self.field(f"{prefix}.{key}", value, (at or prefix, key))
            else:
                self.unknown(f"{prefix}.{key}")

    def top(self, body: Mapping[str, Any], handled: Iterable[str] = ()) -> None:
        """Every top-level field of ``body`` but those the decoder notes itself
        (``handled``); a ``null`` value counts as absent."""
        honoured = _TOP_HONOURED[self.dialect]
        if honoured.issuperset(body):
            return  # the common body: only fields every upstream honours
        skip = frozenset(handled)
        for key, value in body.items():
            if key in honoured or key in skip or value is None:
                continue
            if (self.dialect, key) in RULES_BY_KEY:
                self.field(key, value)
            else:
                self.unknown(key)

    def headers(self, headers: Iterable[Header]) -> None:
        for name, value in headers:
            if (self.dialect, name) in RULES_BY_KEY:
                self.field(name, value)

    def screens(self) -> dict[str, Screen]:
        """The verdict for each target (empty when nothing needs one)."""
        if not self.seen:
            return {}
        out: dict[str, Screen] = {}
        for target in TARGETS:
            screen = self._screen(target)
            if screen.refused or screen.dropped or screen.carried:
                out[target] = screen
        return out

    def _screen(self, target: Target) -> Screen:
        refused: list[tuple[str, str]] = []
        dropped: list[str] = []
        carried: list[tuple[str, Any]] = []
        for seen in self.seen:
            r = seen.rule
            if r is None:
                if target != self.dialect:
                    dropped.append(_header_name(seen.param))
                continue
            outcome = r.outcome(target)
            if outcome == "refused":
                refused.append((seen.param, _refusal(seen.param, r, target).message))
            elif outcome == "dropped":
                dropped.append(r.notice)
            elif r.carry and target != self.dialect and outcome in ("forwarded", "translated"):
                value = seen.value if r.convert is None else r.convert(target, seen.value)
                if value is None:
                    dropped.append(r.notice)
                else:
                    carried.append((r.target_field(target), value))
        return Screen(tuple(refused), tuple(dict.fromkeys(dropped)), tuple(carried))


def _is_neutral(value: Any, neutral: tuple[Any, ...]) -> bool:
    return any(type(value) is type(n) and value == n for n in neutral)


def _header_name(param: str) -> str:
    """A client's field name as a header may carry it (percent-encoded, bounded)."""
    return quote(param[:64], safe="-_.[]")


def _refusal(param: str, r: Rule, target: Target | None) -> InvalidRequest:
    where = (
        "by this gateway"
        if target is None
        else (f"for this model's upstream ({WIRE_NAMES[target]})")
    )
    reason = f": {r.note}" if r.note else ""
    return InvalidRequest(
        f"{param} is not supported {where}{reason}.", param=param, code="unsupported_parameter"
    )
