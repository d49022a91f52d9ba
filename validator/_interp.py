"""The error-collecting back end: walks the node table and reports every failure.

Used after the generated fast path has said "invalid" until the schema's error code
(``_errgen``, the same walk written out per schema) is generated, for a lazily compiled
schema, and where generation was refused; it favours clear, complete, deterministically
ordered errors over speed.
Order, per schema location: depth, false, type, enum, const, string keywords, number
keywords, required (schema order), properties (schema order), additional properties
(instance order), array sizes, items (index order), anyOf, allOf (each branch's own
errors), oneOf, then the ``$ref`` target.

It walks the packed table (``_table``) directly: plain tuples the cyclic GC stops
tracking, so a cached large schema adds next to nothing to full collections.
"""

from __future__ import annotations

from typing import Any

from validator._errors import ValidationError, error, plural, pointer, show, show_enum
from validator._formats import FORMATS
from validator._jsonvalue import is_number, json_equal, multiple_of, type_matches
from validator._regex import Searcher
from validator._table import (
    ALL_OF,
    ANY_OF,
    ARRAY,
    CONST,
    ENUM,
    FALSE,
    NUMBER,
    OBJECT,
    ONE_OF,
    REF,
    STRING,
    TYPES,
    Packed,
    Table,
)

__all__ = ["MAX_INSTANCE_DEPTH", "Interpreter"]

# Deepest instance nesting at which a $ref is still followed. Recursive schemas with deeper
# data get a "exceeds maximum depth" error instead of exhausting the Python stack.
MAX_INSTANCE_DEPTH = 64

_Path = tuple[str | int, ...]


class Interpreter:
    """Collects all ``ValidationError`` s of an instance against a node table."""

    __slots__ = ("_false", "_locations", "_nodes", "_regex")

    def __init__(self, table: Table) -> None:
        self._nodes: tuple[Packed, ...] = table.nodes
        self._regex: dict[int, Searcher] = table.regex
        self._locations = table.locations or ("",) * len(table.nodes)
        self._false = frozenset(i for i, n in enumerate(table.nodes) if n[FALSE])

    def table(self) -> Table:
        """The node table this interpreter walks."""
        return Table(self._nodes, self._regex, self._locations)

    def errors(self, instance: Any) -> list[ValidationError]:
        out: list[ValidationError] = []
        try:
            self._check(0, instance, (), 0, out)
        except RecursionError:
            # Only reachable for schemas far beyond lint's limits; never crash the caller.
            return [error((), "depth", f"exceeds maximum depth {MAX_INSTANCE_DEPTH}")]
        return out

    def is_valid(self, instance: Any) -> bool:
        return not self.errors(instance)

    def accepts(self, nid: int, instance: Any) -> bool:
        """Whether ``instance`` is valid against node ``nid`` (a subschema) alone."""
        out: list[ValidationError] = []
        try:
            self._check(nid, instance, (), 0, out)
        except RecursionError:
            return False
        return not out

    def _check(self, nid: int, x: Any, path: _Path, depth: int, out: list[ValidationError]) -> None:
        node = self._nodes[nid]
        loc = self._locations[nid]
        if node[FALSE]:
            out.append(error(path, "false", "is not allowed", loc, x))
            return
        types = node[TYPES]
        if types is not None and not any(type_matches(t, x) for t in types):
            out.append(error(path, "type", "must be " + " or ".join(types), loc + "/type", x))
        enum = node[ENUM]
        if enum is not None and not any(json_equal(x, v) for v in enum):
            out.append(error(path, "enum", "must be one of " + show_enum(enum), loc + "/enum", x))
        const = node[CONST]
        if const is not None and not json_equal(x, const[0]):
            out.append(
                error(path, "const", "must be equal to " + show(const[0]), loc + "/const", x)
            )
        if isinstance(x, str):
            if node[STRING] is not None:
                self._string(nid, node[STRING], x, path, out)
        elif is_number(x):
            if node[NUMBER] is not None:
                _number(node[NUMBER], x, path, loc, out)
        elif isinstance(x, dict):
            if node[OBJECT] is not None:
                self._object(node[OBJECT], x, path, loc, depth, out)
        elif isinstance(x, list) and node[ARRAY] is not None:
            self._array(node[ARRAY], x, path, loc, depth, out)
        if node[ANY_OF] is not None:
            self._any_of(node[ANY_OF], x, path, loc, depth, out)
        if node[ALL_OF] is not None:
            for branch in node[ALL_OF]:
                self._check(branch, x, path, depth, out)
        if node[ONE_OF] is not None:
            self._one_of(node[ONE_OF], x, path, loc, depth, out)
        ref = node[REF]
        if ref is not None:
            if depth > MAX_INSTANCE_DEPTH:
                out.append(
                    error(
                        path,
                        "depth",
                        f"exceeds maximum depth {MAX_INSTANCE_DEPTH}",
                        loc + "/$ref",
                        x,
                    )
                )
            else:
                self._check(ref, x, path, depth, out)

    def _string(
        self, nid: int, spec: Packed, x: str, path: _Path, out: list[ValidationError]
    ) -> None:
        min_length, max_length, pattern, fmt = spec
        loc = self._locations[nid]
        if min_length is not None and len(x) < min_length:
            text = f"must be at least {plural(min_length, 'character')}"
            out.append(error(path, "minLength", text, loc + "/minLength", x))
        if max_length is not None and len(x) > max_length:
            text = f"must be at most {plural(max_length, 'character')}"
            out.append(error(path, "maxLength", text, loc + "/maxLength", x))
        if pattern is not None and self._regex[nid](x) is None:
            out.append(error(path, "pattern", f"must match pattern {pattern}", loc + "/pattern", x))
        if fmt is not None and not FORMATS[fmt](x):
            out.append(error(path, "format", f"must be a valid {fmt}", loc + "/format", x))

    def _object(
        self,
        spec: Packed,
        x: dict[str, Any],
        path: _Path,
        loc: str,
        depth: int,
        out: list[ValidationError],
    ) -> None:
        properties, required, additional = spec
        for name in required:
            if name not in x:
                out.append(
                    error(
                        path,
                        "required",
                        f"must have required property {show(name)}",
                        loc + "/required",
                        x,
                    )
                )
        known: set[str] = set()
        for name, child in properties:
            known.add(name)
            if name in x:
                self._check(child, x[name], (*path, name), depth + 1, out)
        if additional is None:
            return
        closed = additional in self._false
        for name, value in x.items():
            if name in known:
                continue
            if closed:
                out.append(
                    error(
                        path,
                        "additionalProperties",
                        f"must not have additional property {show(name)}",
                        loc + "/additionalProperties",
                        x,
                    )
                )
            else:
                self._check(additional, value, (*path, name), depth + 1, out)

    def _array(
        self,
        spec: Packed,
        x: list[Any],
        path: _Path,
        loc: str,
        depth: int,
        out: list[ValidationError],
    ) -> None:
        min_items, max_items, items = spec
        if min_items is not None and len(x) < min_items:
            out.append(
                error(
                    path,
                    "minItems",
                    f"must have at least {plural(min_items, 'item')}",
                    loc + "/minItems",
                    x,
                )
            )
        if max_items is not None and len(x) > max_items:
            out.append(
                error(
                    path,
                    "maxItems",
                    f"must have at most {plural(max_items, 'item')}",
                    loc + "/maxItems",
                    x,
                )
            )
        if items is not None:
            for index, item in enumerate(x):
                self._check(items, item, (*path, index), depth + 1, out)

    def _any_of(
        self,
        branches: tuple[int, ...],
        x: Any,
        path: _Path,
        loc: str,
        depth: int,
        out: list[ValidationError],
    ) -> None:
        results: list[list[ValidationError]] = []
        for branch in branches:
            found: list[ValidationError] = []
            self._check(branch, x, path, depth, found)
            if not found:
                return
            results.append(found)
        # When exactly one branch accepts the instance's type, its errors are the useful ones.
        where = pointer(path)
        typed = [
            r
            for r in results
            if not any(e.pointer == where and e.keyword in ("type", "false") for e in r)
        ]
        if len(typed) == 1:
            out.extend(typed[0])
        else:
            out.append(
                error(path, "anyOf", "must match at least one schema in anyOf", loc + "/anyOf", x)
            )

    def _one_of(
        self,
        branches: tuple[int, ...],
        x: Any,
        path: _Path,
        loc: str,
        depth: int,
        out: list[ValidationError],
    ) -> None:
        results: list[list[ValidationError]] = []
        for branch in branches:
            found: list[ValidationError] = []
            self._check(branch, x, path, depth, found)
            results.append(found)
        matched = [i for i, r in enumerate(results) if not r]
        if len(matched) == 1:
            return
        if matched:
            which = ", ".join(f"oneOf[{i}]" for i in matched)
            text = f"must match exactly one schema in oneOf, not {len(matched)} ({which})"
            out.append(error(path, "oneOf", text, loc + "/oneOf", x))
            return
        where = pointer(path)
        typed = [
            r
            for r in results
            if not any(
                e.pointer == where and e.keyword in ("type", "false", "const", "enum") for e in r
            )
        ]
        if len(typed) == 1:
            out.extend(typed[0])
        else:
            out.append(
                error(path, "oneOf", "must match exactly one schema in oneOf", loc + "/oneOf", x)
            )


def _number(
    spec: Packed, x: int | float, path: _Path, loc: str, out: list[ValidationError]
) -> None:
    minimum, maximum, exclusive_minimum, exclusive_maximum, multiple = spec
    if minimum is not None and x < minimum:
        out.append(error(path, "minimum", f"must be >= {show(minimum)}", loc + "/minimum", x))
    if maximum is not None and x > maximum:
        out.append(error(path, "maximum", f"must be <= {show(maximum)}", loc + "/maximum", x))
    if exclusive_minimum is not None and x <= exclusive_minimum:
        out.append(
            error(
                path,
                "exclusiveMinimum",
                f"must be > {show(exclusive_minimum)}",
                loc + "/exclusiveMinimum",
                x,
            )
        )
    if exclusive_maximum is not None and x >= exclusive_maximum:
        out.append(
            error(
                path,
                "exclusiveMaximum",
                f"must be < {show(exclusive_maximum)}",
                loc + "/exclusiveMaximum",
                x,
            )
        )
    if multiple is not None and not multiple_of(x, multiple):
        out.append(
            error(
                path,
                "multipleOf",
                f"must be a multiple of {show(multiple)}",
                loc + "/multipleOf",
                x,
            )
        )
