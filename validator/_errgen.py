"""Generated error collection: the interpreter's walk (``_interp``) written out per schema.

One Python function per schema location, ``_eN(x, p, d, out)``, holding only the checks
that location has, with its messages and schema paths as constants; children are calls,
``$ref`` and cycles included. The order of checks, the texts and the ``anyOf``/``oneOf``
branch choice are the interpreter's, line for line (``_any_of``/``_one_of`` below are its
two methods over generated branches), so both back ends return equal error lists; the
interpreter stays for schemas whose error code is not generated (yet, or refused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from validator._errors import ValidationError, error, plural, pointer, show, show_enum
from validator._formats import FORMATS
from validator._interp import MAX_INSTANCE_DEPTH
from validator._jsonvalue import is_integer, is_number, json_equal, multiple_of
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
    TRUE_PACKED,
    TYPES,
    Table,
)

__all__ = ["ErrorsFn", "generate_errors"]

ErrorsFn = Callable[[Any], list[ValidationError]]
_Branch = Callable[[Any, tuple[str | int, ...], int, list[ValidationError]], None]
# Past this much source the interpreter keeps reporting: compiling it would hold the one
# codegen thread (and the GIL, in slices) for most of a second, ahead of other schemas.
_MAX_SOURCE = 512 << 10
_GROUPS_PER_FUNCTION = 40  # checks per function: compile() time grows faster than a body
_BATCH_LINES = 100  # lines per compile() call: each holds the GIL throughout

_TYPE_TESTS = {
    "string": "isinstance(x, str)",
    "object": "isinstance(x, dict)",
    "array": "isinstance(x, list)",
    "null": "x is None",
    "boolean": "isinstance(x, bool)",
    "integer": "(x.__class__ is int or _is_integer(x))",
    "number": "(x.__class__ is int or x.__class__ is float or _is_number(x))",
}
_BUILTINS = {
    "isinstance": isinstance,
    "len": len,
    "any": any,
    "int": int,
    "float": float,
    "str": str,
    "dict": dict,
    "list": list,
    "bool": bool,
    "enumerate": enumerate,
    "RecursionError": RecursionError,
}


class ErrorCodegenError(RuntimeError):
    """The error code was not generated (too large); the interpreter reports errors."""


def _nothing(_x: Any, _p: Any, _d: int, _out: list[ValidationError]) -> None:
    return None


def _any_of(
    branches: tuple[_Branch, ...],
    x: Any,
    p: tuple[str | int, ...],
    d: int,
    out: list[ValidationError],
    loc: str,
) -> None:
    results: list[list[ValidationError]] = []
    for branch in branches:
        found: list[ValidationError] = []
        branch(x, p, d, found)
        if not found:
            return
        results.append(found)
    where = pointer(p)
    typed = [
        r
        for r in results
        if not any(e.pointer == where and e.keyword in ("type", "false") for e in r)
    ]
    if len(typed) == 1:
        out.extend(typed[0])
    else:
        out.append(error(p, "anyOf", "must match at least one schema in anyOf", loc, x))


def _one_of(
    branches: tuple[_Branch, ...],
    x: Any,
    p: tuple[str | int, ...],
    d: int,
    out: list[ValidationError],
    loc: str,
) -> None:
    results: list[list[ValidationError]] = []
    for branch in branches:
        found: list[ValidationError] = []
        branch(x, p, d, found)
        results.append(found)
    matched = [i for i, r in enumerate(results) if not r]
    if len(matched) == 1:
        return
    if matched:
        which = ", ".join(f"oneOf[{i}]" for i in matched)
        text = f"must match exactly one schema in oneOf, not {len(matched)} ({which})"
        out.append(error(p, "oneOf", text, loc, x))
        return
    where = pointer(p)
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
        out.append(error(p, "oneOf", "must match exactly one schema in oneOf", loc, x))


class _Gen:
    def __init__(self, table: Table) -> None:
        self.nodes = table.nodes
        self.regex = table.regex
        self.locations = table.locations or ("",) * len(table.nodes)
        self.ns: dict[str, Any] = {
            "__builtins__": dict(_BUILTINS),
            "_err": error,
            "_show": show,
            "_json_equal": json_equal,
            "_is_integer": is_integer,
            "_is_number": is_number,
            "_multiple_of": multiple_of,
            "_any_of": _any_of,
            "_one_of": _one_of,
            "_nothing": _nothing,
        }
        self.names: dict[int, str] = {}
        self.queue: list[int] = []
        self.functions: list[list[str]] = []
        self.counter = 0
        self.size = 0
        self.source = ""

    def const(self, value: Any) -> str:
        self.counter += 1
        name = f"_c{self.counter}"
        self.ns[name] = value
        return name

    def trivial(self, nid: int) -> bool:
        return self.nodes[nid] == TRUE_PACKED

    def function(self, nid: int) -> str:
        """The name of node ``nid``'s error function (``_nothing`` for a trivial node)."""
        if self.trivial(nid):
            return "_nothing"
        name = self.names.get(nid)
        if name is None:
            name = self.names[nid] = f"_e{nid}"
            self.queue.append(nid)
        return name

    def run(self) -> ErrorsFn:
        root = self.function(0)
        while self.queue:
            self.emit(self.queue.pop())
            if self.size > _MAX_SOURCE:
                raise ErrorCodegenError("generated error code too large")
        depth = self.const([error((), "depth", f"exceeds maximum depth {MAX_INSTANCE_DEPTH}")])
        self.functions.append(
            [
                "def errors(x):",
                "    out = []",
                "    try:",
                f"        {root}(x, (), 0, out)",
                "    except RecursionError:",
                f"        return list({depth})",
                "    return out",
            ]
        )
        self.source = "\n".join(line for lines in self.functions for line in lines)
        batch: list[str] = []
        for lines in self.functions:
            batch.extend(lines)
            if len(batch) >= _BATCH_LINES:
                self.compile(batch)
                batch = []
        self.compile(batch)
        fn: ErrorsFn = self.ns["errors"]
        return fn

    def compile(self, lines: list[str]) -> None:
        if not lines:
            return
        try:
            exec(compile("\n".join(lines) + "\n", "<syntic-validator-errors>", "exec"), self.ns)
        except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
            raise ErrorCodegenError(str(exc)) from exc

    def report(self, lines: list[str], indent: str, keyword: str, text: str, at: str) -> None:
        # Every string is a namespace entry: schema text never becomes source code.
        lines.append(
            f"{indent}out.append(_err(p, {self.const(keyword)}, {self.const(text)}, "
            f"{self.const(at)}, x))"
        )

    def emit(self, nid: int) -> None:
        node = self.nodes[nid]
        loc = self.locations[nid]
        lines = [f"def _e{nid}(x, p, d, out):"]
        if node[FALSE]:
            self.report(lines, "    ", "false", "is not allowed", loc)
            self.finish(lines)
            return
        types = node[TYPES]
        if types is not None:
            tests = " or ".join(_TYPE_TESTS[t] for t in types)
            lines.append(f"    if not ({tests}):")
            self.report(lines, "        ", "type", "must be " + " or ".join(types), loc + "/type")
        enum = node[ENUM]
        if enum is not None:
            strings = self.const(frozenset(v for v in enum if isinstance(v, str)))
            others = self.const(tuple(v for v in enum if not isinstance(v, str)))
            lines.append(
                f"    if not (x in {strings} if isinstance(x, str) else "
                f"any(_json_equal(x, e) for e in {others})):"
            )
            self.report(
                lines, "        ", "enum", "must be one of " + show_enum(enum), loc + "/enum"
            )
        const = node[CONST]
        if const is not None:
            lines.append(f"    if not _json_equal(x, {self.const(const[0])}):")
            self.report(
                lines, "        ", "const", "must be equal to " + show(const[0]), loc + "/const"
            )
        if node[STRING] is not None:
            self.emit_string(nid, lines, loc)
        if node[NUMBER] is not None:
            self.emit_number(node[NUMBER], lines, loc)
        if node[OBJECT] is not None:
            self.emit_object(node[OBJECT], lines, loc)
        if node[ARRAY] is not None:
            self.emit_array(node[ARRAY], lines, loc)
        for field, helper, keyword in (
            (ANY_OF, "_any_of", "anyOf"),
            (ALL_OF, None, "allOf"),
            (ONE_OF, "_one_of", "oneOf"),
        ):
            branches = node[field]
            if branches is None:
                continue
            names = [self.function(b) for b in branches]
            if helper is None:
                lines.extend(f"    {n}(x, p, d, out)" for n in names if n != "_nothing")
            else:
                fns = self.const(tuple(names))  # bound below, once every name exists
                self.ns.setdefault("_late", []).append((fns, tuple(names)))
                lines.append(f"    {helper}({fns}, x, p, d, out, {self.const(f'{loc}/{keyword}')})")
        ref = node[REF]
        if ref is not None:
            lines.append(f"    if d > {MAX_INSTANCE_DEPTH}:")
            self.report(
                lines,
                "        ",
                "depth",
                f"exceeds maximum depth {MAX_INSTANCE_DEPTH}",
                loc + "/$ref",
            )
            target = self.function(ref)
            if target != "_nothing":
                lines.append("    else:")
                lines.append(f"        {target}(x, p, d, out)")
        self.finish(lines)

    def finish(self, lines: list[str]) -> None:
        if len(lines) == 1:
            lines.append("    return None")
        self.size += sum(len(line) + 1 for line in lines)
        self.functions.append(lines)

    def emit_string(self, nid: int, lines: list[str], loc: str) -> None:
        min_length, max_length, pattern, fmt = self.nodes[nid][STRING]
        lines.append("    if isinstance(x, str):")
        if min_length is not None:
            lines.append(f"        if len(x) < {self.const(min_length)}:")
            self.report(
                lines,
                "            ",
                "minLength",
                f"must be at least {plural(min_length, 'character')}",
                loc + "/minLength",
            )
        if max_length is not None:
            lines.append(f"        if len(x) > {self.const(max_length)}:")
            self.report(
                lines,
                "            ",
                "maxLength",
                f"must be at most {plural(max_length, 'character')}",
                loc + "/maxLength",
            )
        if pattern is not None:
            lines.append(f"        if {self.const(self.regex[nid])}(x) is None:")
            self.report(
                lines, "            ", "pattern", f"must match pattern {pattern}", loc + "/pattern"
            )
        if fmt is not None:
            lines.append(f"        if not {self.const(FORMATS[fmt])}(x):")
            self.report(lines, "            ", "format", f"must be a valid {fmt}", loc + "/format")

    def emit_number(self, spec: tuple[Any, ...], lines: list[str], loc: str) -> None:
        lines.append("    if (x.__class__ is int or x.__class__ is float or _is_number(x)):")
        minimum, maximum, exclusive_minimum, exclusive_maximum, multiple = spec
        for value, op, keyword, text in (
            (minimum, "<", "minimum", "must be >= "),
            (maximum, ">", "maximum", "must be <= "),
            (exclusive_minimum, "<=", "exclusiveMinimum", "must be > "),
            (exclusive_maximum, ">=", "exclusiveMaximum", "must be < "),
        ):
            if value is not None:
                lines.append(f"        if x {op} {self.const(value)}:")
                self.report(lines, "            ", keyword, text + show(value), f"{loc}/{keyword}")
        if multiple is not None:
            lines.append(f"        if not _multiple_of(x, {self.const(multiple)}):")
            self.report(
                lines,
                "            ",
                "multipleOf",
                f"must be a multiple of {show(multiple)}",
                loc + "/multipleOf",
            )

    def emit_object(self, spec: tuple[Any, ...], lines: list[str], loc: str) -> None:
        properties, required, additional = spec
        groups: list[list[str]] = []  # one check each, at the indent of a function body
        for name in required:
            group = [f"    if {self.const(name)} not in x:"]
            self.report(
                group,
                "        ",
                "required",
                f"must have required property {show(name)}",
                loc + "/required",
            )
            groups.append(group)
        for name, child in properties:
            fn = self.function(child)
            if fn != "_nothing":
                key = self.const(name)
                groups.append(
                    [f"    if {key} in x:", f"        {fn}(x[{key}], (*p, {key}), d + 1, out)"]
                )
        if additional is not None and not self.trivial(additional):
            known = self.const(frozenset(n for n, _ in properties))
            if self.nodes[additional][FALSE]:
                at = self.const(loc + "/additionalProperties")
                keyword = self.const("additionalProperties")
                text = self.const("must not have additional property ")
                groups.append(
                    [
                        "    for k in x:",
                        f"        if k not in {known}:",
                        f"            out.append(_err(p, {keyword}, {text} + _show(k), {at}, x))",
                    ]
                )
            else:
                fn = self.function(additional)
                groups.append(
                    [
                        "    for k, v in x.items():",
                        f"        if k not in {known}:",
                        f"            {fn}(v, (*p, k), d + 1, out)",
                    ]
                )
        lines.append("    if isinstance(x, dict):")
        if not groups:
            lines.append("        pass")
        elif len(groups) <= _GROUPS_PER_FUNCTION:
            lines.extend("    " + line for group in groups for line in group)
        else:  # a wide object: its checks in order, spread over functions of bounded size
            for start in range(0, len(groups), _GROUPS_PER_FUNCTION):
                self.counter += 1
                part = f"_part{self.counter}"
                body = [f"def {part}(x, p, d, out):"]
                body.extend(
                    line for group in groups[start : start + _GROUPS_PER_FUNCTION] for line in group
                )
                self.finish(body)
                lines.append(f"        {part}(x, p, d, out)")

    def emit_array(self, spec: tuple[Any, ...], lines: list[str], loc: str) -> None:
        min_items, max_items, items = spec
        lines.append("    if isinstance(x, list):")
        start = len(lines)
        if min_items is not None:
            lines.append(f"        if len(x) < {self.const(min_items)}:")
            self.report(
                lines,
                "            ",
                "minItems",
                f"must have at least {plural(min_items, 'item')}",
                loc + "/minItems",
            )
        if max_items is not None:
            lines.append(f"        if len(x) > {self.const(max_items)}:")
            self.report(
                lines,
                "            ",
                "maxItems",
                f"must have at most {plural(max_items, 'item')}",
                loc + "/maxItems",
            )
        if items is not None and not self.trivial(items):
            fn = self.function(items)
            lines.append("        for i, v in enumerate(x):")
            lines.append(f"            {fn}(v, (*p, i), d + 1, out)")
        if len(lines) == start:
            lines.append("        pass")


def generate_errors(table: Table) -> tuple[ErrorsFn, dict[str, Any], str]:
    """The generated ``errors(instance)`` for a node table, its namespace (whose functions
    refer to each other: clear it to free them) and its source. Raises
    ErrorCodegenError."""
    gen = _Gen(table)
    fn = gen.run()
    ns = gen.ns
    for const, names in ns.pop("_late", []):
        ns[const] = tuple(ns[n] for n in names)
    return fn, ns, gen.source
