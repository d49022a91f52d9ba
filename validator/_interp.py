"""The error-collecting back end: walks the node table and reports every failure.

Used only after the generated fast path has said "invalid" (or when code generation was
refused), so it favours clear, complete, deterministically ordered errors over speed.
Order, per schema location: depth, false, type, enum, const, string keywords, number
keywords, required (schema order), properties (schema order), additional properties
(instance order), array sizes, items (index order), anyOf, then the ``$ref`` target.
"""

from __future__ import annotations

from typing import Any

from validator._errors import ValidationError, error, pointer, show, show_enum
from validator._formats import FORMATS
from validator._ir import Node
from validator._jsonvalue import is_number, json_equal, multiple_of, type_matches

__all__ = ["MAX_INSTANCE_DEPTH", "Interpreter"]

# Deepest instance nesting at which a $ref is still followed. Recursive schemas with deeper
# data get a "exceeds maximum depth" error instead of exhausting the Python stack.
MAX_INSTANCE_DEPTH = 64

_TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")
_Path = tuple[str | int, ...]


class Interpreter:
    """Collects all ``ValidationError`` s of an instance against a node table."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: list[Node]) -> None:
        self._nodes = nodes

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

    def _check(self, nid: int, x: Any, path: _Path, depth: int, out: list[ValidationError]) -> None:
        node = self._nodes[nid]
        if node.false:
            out.append(error(path, "false", "is not allowed"))
            return
        if node.types is not None and not any(type_matches(t, x) for t in node.types):
            names = [t for t in _TYPE_ORDER if t in node.types]
            out.append(error(path, "type", "must be " + " or ".join(names)))
        if node.enum is not None and not any(json_equal(x, v) for v in node.enum):
            out.append(error(path, "enum", "must be one of " + show_enum(node.enum)))
        if node.has_const and not json_equal(x, node.const):
            out.append(error(path, "const", "must be equal to " + show(node.const)))
        if isinstance(x, str):
            self._string(node, x, path, out)
        elif is_number(x):
            self._number(node, x, path, out)
        elif isinstance(x, dict):
            self._object(node, x, path, depth, out)
        elif isinstance(x, list):
            self._array(node, x, path, depth, out)
        if node.any_of is not None:
            self._any_of(node.any_of, x, path, depth, out)
        if node.ref is not None:
            if depth > MAX_INSTANCE_DEPTH:
                out.append(error(path, "depth", f"exceeds maximum depth {MAX_INSTANCE_DEPTH}"))
            else:
                self._check(node.ref, x, path, depth, out)

    def _string(self, node: Node, x: str, path: _Path, out: list[ValidationError]) -> None:
        if node.min_length is not None and len(x) < node.min_length:
            out.append(error(path, "minLength", f"must be at least {node.min_length} characters"))
        if node.max_length is not None and len(x) > node.max_length:
            out.append(error(path, "maxLength", f"must be at most {node.max_length} characters"))
        if node.regex is not None and node.regex(x) is None:
            out.append(error(path, "pattern", f"must match pattern {node.pattern}"))
        if node.format is not None and not FORMATS[node.format](x):
            out.append(error(path, "format", f"must be a valid {node.format}"))

    def _number(self, node: Node, x: int | float, path: _Path, out: list[ValidationError]) -> None:
        if node.minimum is not None and x < node.minimum:
            out.append(error(path, "minimum", f"must be >= {show(node.minimum)}"))
        if node.maximum is not None and x > node.maximum:
            out.append(error(path, "maximum", f"must be <= {show(node.maximum)}"))
        if node.exclusive_minimum is not None and x <= node.exclusive_minimum:
            out.append(error(path, "exclusiveMinimum", f"must be > {show(node.exclusive_minimum)}"))
        if node.exclusive_maximum is not None and x >= node.exclusive_maximum:
            out.append(error(path, "exclusiveMaximum", f"must be < {show(node.exclusive_maximum)}"))
        if node.multiple_of is not None and not multiple_of(x, node.multiple_of):
            out.append(error(path, "multipleOf", f"must be a multiple of {show(node.multiple_of)}"))

    def _object(
        self, node: Node, x: dict[str, Any], path: _Path, depth: int, out: list[ValidationError]
    ) -> None:
        for name in node.required:
            if name not in x:
                out.append(error(path, "required", f"must have required property {show(name)}"))
        known: set[str] = set()
        for name, child in node.properties:
            known.add(name)
            if name in x:
                self._check(child, x[name], (*path, name), depth + 1, out)
        if node.additional is None:
            return
        extra = self._nodes[node.additional]
        for name, value in x.items():
            if name in known:
                continue
            if extra.false:
                out.append(
                    error(
                        path,
                        "additionalProperties",
                        f"must not have additional property {show(name)}",
                    )
                )
            else:
                self._check(node.additional, value, (*path, name), depth + 1, out)

    def _array(
        self, node: Node, x: list[Any], path: _Path, depth: int, out: list[ValidationError]
    ) -> None:
        if node.min_items is not None and len(x) < node.min_items:
            out.append(error(path, "minItems", f"must have at least {node.min_items} items"))
        if node.max_items is not None and len(x) > node.max_items:
            out.append(error(path, "maxItems", f"must have at most {node.max_items} items"))
        if node.items is not None:
            for index, item in enumerate(x):
                self._check(node.items, item, (*path, index), depth + 1, out)

    def _any_of(
        self, branches: tuple[int, ...], x: Any, path: _Path, depth: int, out: list[ValidationError]
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
            r for r in results
            if not any(e.pointer == where and e.keyword in ("type", "false") for e in r)
        ]  # fmt: skip
        if len(typed) == 1:
            out.extend(typed[0])
        else:
            out.append(error(path, "anyOf", "must match at least one schema in anyOf"))
