"""The fast back end: a generated Python ``is_valid(x)`` function per schema.

Safe by construction: the generated source is assembled only from fixed templates, names
this module invents (``_c12``, ``_f3``, ``v4``) and small integers it computes (depth
offsets). Every value taken from the schema (property names, enum/const values, numbers,
patterns, formats) enters as an object in the function's namespace, never as source text,
so no schema can inject code. The namespace has a minimal ``__builtins__``.

Unlike fastjsonschema (which interpolates schema text into exec'd source, resolves remote
refs and uses backtracking ``re``), nothing here reads the schema dict at all: it reads the
node table from ``_ir``, which already refused anything outside the subset.

The function answers only valid/invalid; ``_interp`` explains failures. If generation is
refused (e.g. Python's own nesting limits), ``generate`` raises ``CodegenError`` and the
caller falls back to the interpreter.

Large schemas are generated as many small functions, compiled in small batches (a cache
miss must not stall other requests). CPython's ``compile()`` holds the GIL for the whole
call and its cost grows faster than linearly with a function's size: one function for a
large schema held it for a visible stall of the event loop (waiting on a worker thread's
compile); figures in ``docs/performance.md``. A function that reaches ``_FUNCTION_LINES``
calls its next child schema as a function of its own and hands the rest of a long
property list to "part" functions (called one after another, so deep data does not
deepen the stack); ``_BATCH_LINES`` bounds each ``compile()`` call to a millisecond or
two, and between calls other threads run. Small schemas stay one function, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from validator._formats import FORMATS
from validator._interp import MAX_INSTANCE_DEPTH
from validator._jsonvalue import is_integer, is_number, json_equal, multiple_of
from validator._table import FALSE, Node, Table

__all__ = ["CodegenError", "generate"]

_MAX_INDENT = 24  # past this, a child schema becomes its own function
_MAX_LOOPS = 6  # nested ``for`` blocks per function (CPython allows 20)
_UNROLL_REQUIRED = 32
_MAX_SOURCE = 4 << 20
_FUNCTION_LINES = 160  # past this, the rest of an object (or the next child) is a new function
_BATCH_LINES = 200  # lines per compile() call (several small functions share one)

_BUILTINS = {
    "isinstance": isinstance,
    "len": len,
    "any": any,
    "str": str,
    "dict": dict,
    "list": list,
    "int": int,
    "float": float,
    "bool": bool,
}

_TYPE_TESTS = {
    "string": "isinstance({v}, str)",
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "null": "{v} is None",
    "boolean": "isinstance({v}, bool)",
    # The exact-class test first: the common case costs no function call.
    "integer": "({v}.__class__ is int or _is_integer({v}))",
    "number": "({v}.__class__ is int or {v}.__class__ is float or _is_number({v}))",
}


class CodegenError(RuntimeError):
    """The schema is valid but the fast path declined it; use the interpreter."""


class _Gen:
    def __init__(self, table: Table) -> None:
        self.table = table
        self.ns: dict[str, Any] = {
            "__builtins__": dict(_BUILTINS),
            "_M": object(),
            "_is_integer": is_integer,
            "_is_number": is_number,
            "_json_equal": json_equal,
        }
        self.lines: list[str] = []  # the function being generated
        self.finished: list[list[str]] = []
        self.functions: dict[int, str] = {}
        self.queue: list[tuple[int, str]] = []
        self.counter = 0

    def const(self, value: Any) -> str:
        self.counter += 1
        name = f"_c{self.counter}"
        self.ns[name] = value
        return name

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def function(self, nid: int) -> str:
        """Name of the function validating node ``nid``; generated once per node."""
        if nid not in self.functions:
            self.counter += 1
            name = f"_f{self.counter}"
            self.functions[nid] = name
            self.queue.append((nid, name))
        return self.functions[nid]

    def full(self) -> bool:
        """True when the function being generated has reached its size budget."""
        return len(self.lines) >= _FUNCTION_LINES

    def run(self) -> Callable[[Any], bool]:
        root = self.function(0)
        while self.queue:
            nid, name = self.queue.pop()
            # ``d`` defaults to 0 so the root is ``is_valid`` itself, with no wrapper call.
            self.lines = [f"def {name}(x, d=0):"]
            self.emit(nid, "x", 0, 1, 0)
            self.lines.append("    return True")
            self.finished.append(self.lines)
        if sum(len(line) + 1 for lines in self.finished for line in lines) > _MAX_SOURCE:
            raise CodegenError("generated source too large")
        for batch in self.batches():
            try:
                code = compile(batch, "<syntic-validator>", "exec")
                exec(code, self.ns)
            except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
                raise CodegenError(str(exc)) from exc
        fn: Callable[[Any], bool] = self.ns[root]
        return fn

    def batches(self) -> list[str]:
        """Whole functions grouped into sources of about ``_BATCH_LINES`` lines each."""
        out: list[str] = []
        batch: list[str] = []
        for lines in self.finished:
            if batch and len(batch) + len(lines) > _BATCH_LINES:
                out.append("\n".join(batch) + "\n")
                batch = []
            batch.extend(lines)
        out.append("\n".join(batch) + "\n")
        return out

    def source(self) -> str:
        return "\n".join(line for lines in self.finished for line in lines)

    def out(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def call(self, nid: int, v: str, k: int, indent: int, check_depth: bool) -> None:
        name = self.function(nid)
        depth = f"d + {k}" if k else "d"
        if check_depth:
            limit = self.const(MAX_INSTANCE_DEPTH)
            self.out(indent, f"if {depth} > {limit} or not {name}({v}, {depth}): return False")
        else:
            self.out(indent, f"if not {name}({v}, {depth}): return False")

    def child(self, nid: int, v: str, k: int, indent: int, loops: int) -> None:
        if self.table.trivial(nid):
            return
        if indent > _MAX_INDENT or loops >= _MAX_LOOPS or self.full():
            self.call(nid, v, k, indent, False)
        else:
            self.emit(nid, v, k, indent, loops)

    def emit(self, nid: int, v: str, k: int, indent: int, loops: int) -> None:
        """Lines that ``return False`` unless ``v`` (at instance depth d + k) matches."""
        node = self.table.node(nid)
        if node.false:
            self.out(indent, "return False")
            return
        known: str | None = None
        if node.types is not None:
            tests = " or ".join(_TYPE_TESTS[t].format(v=v) for t in sorted(node.types))
            self.out(indent, f"if not ({tests}): return False")
            if len(node.types) == 1:
                known = next(iter(node.types))
        if node.enum is not None:
            self.emit_enum(node.enum, v, known, indent)
        if node.has_const:
            if known == "string" and isinstance(node.const, str):
                self.out(indent, f"if {v} != {self.const(node.const)}: return False")
            else:
                self.out(indent, f"if not _json_equal({v}, {self.const(node.const)}): return False")
        self.guarded(node, "string", known, v, indent, lambda i: self.emit_string(node, v, i))
        self.guarded(node, "number", known, v, indent, lambda i: self.emit_number(node, v, i))
        self.guarded(
            node, "object", known, v, indent, lambda i: self.emit_object(nid, v, k, i, loops)
        )
        self.guarded(
            node, "array", known, v, indent, lambda i: self.emit_array(node, v, k, i, loops)
        )
        if node.any_of is not None:
            names = [self.function(b) for b in node.any_of]
            depth = f"d + {k}" if k else "d"
            calls = " or ".join(f"{n}({v}, {depth})" for n in names)
            self.out(indent, f"if not ({calls}): return False")
        if node.all_of is not None:
            for branch in node.all_of:
                self.call(branch, v, k, indent, False)
        if node.one_of is not None:
            names = [self.function(b) for b in node.one_of]
            depth = f"d + {k}" if k else "d"
            # bools add up to the number of branches that match
            calls = " + ".join(f"{n}({v}, {depth})" for n in names)
            self.out(indent, f"if ({calls}) != 1: return False")
        if node.ref is not None:
            self.call(node.ref, v, k, indent, True)

    def guarded(
        self,
        node: Node,
        kind: str,
        known: str | None,
        v: str,
        indent: int,
        body: Callable[[int], None],
    ) -> None:
        if not _has(node, kind):
            return
        if known == kind or (kind == "number" and known == "integer"):
            body(indent)
            return
        if known is not None:
            return  # the type check already excluded this kind
        test = "_is_number({v})" if kind == "number" else _TYPE_TESTS[kind]
        self.out(indent, f"if {test.format(v=v)}:")
        before = len(self.lines)
        body(indent + 1)
        if len(self.lines) == before:
            self.out(indent + 1, "pass")

    def emit_enum(self, values: tuple[Any, ...], v: str, known: str | None, indent: int) -> None:
        strings = frozenset(x for x in values if isinstance(x, str))
        others = tuple(x for x in values if not isinstance(x, str))
        s = self.const(strings)
        if known == "string":
            self.out(indent, f"if {v} not in {s}: return False")
            return
        o = self.const(others)
        self.out(
            indent,
            f"if not ({v} in {s} if isinstance({v}, str) else "
            f"any(_json_equal({v}, e) for e in {o})): return False",
        )

    def emit_string(self, node: Node, v: str, indent: int) -> None:
        if node.min_length is not None:
            self.out(indent, f"if len({v}) < {self.const(node.min_length)}: return False")
        if node.max_length is not None:
            self.out(indent, f"if len({v}) > {self.const(node.max_length)}: return False")
        if node.regex is not None:
            self.out(indent, f"if {self.const(node.regex)}({v}) is None: return False")
        if node.format is not None:
            self.out(indent, f"if not {self.const(FORMATS[node.format])}({v}): return False")

    def emit_number(self, node: Node, v: str, indent: int) -> None:
        for value, op in (
            (node.minimum, "<"),
            (node.maximum, ">"),
            (node.exclusive_minimum, "<="),
            (node.exclusive_maximum, ">="),
        ):
            if value is not None:
                self.out(indent, f"if {v} {op} {self.const(value)}: return False")
        if node.multiple_of is not None:
            fn = self.const(multiple_of)
            self.out(indent, f"if not {fn}({v}, {self.const(node.multiple_of)}): return False")

    def emit_object(self, nid: int, v: str, k: int, indent: int, loops: int) -> None:
        node = self.table.node(nid)
        required = set(node.required)
        if node.required:
            if len(node.required) <= _UNROLL_REQUIRED:
                consts = [self.const(r) for r in node.required]
                self.out(
                    indent,
                    "if " + " or ".join(f"{n} not in {v}" for n in consts) + ": return False",
                )
            else:
                self.out(
                    indent,
                    f"if not {v}.keys() >= {self.const(frozenset(node.required))}: return False",
                )
        self.emit_properties(nid, v, k, indent, loops, 0, False)
        if node.additional is None or self.table.trivial(node.additional):
            return
        names = frozenset(n for n, _ in node.properties)
        if self.table.nodes[node.additional][FALSE]:
            if names and names <= required:
                # Every declared name is present, so any extra key shows up in the count.
                self.out(indent, f"if len({v}) != {self.const(len(names))}: return False")
            else:
                known = self.const(names)
                self.out(indent, f"for kk in {v}:")
                self.out(indent + 1, f"if kk not in {known}: return False")
            return
        known = self.const(names)
        key_var, item = self.var(), self.var()
        self.out(indent, f"for {key_var}, {item} in {v}.items():")
        self.out(indent + 1, f"if {key_var} not in {known}:")
        self.child(node.additional, item, k + 1, indent + 2, loops + 1)
        self.out(indent + 2, "pass")

    def emit_properties(
        self, nid: int, v: str, k: int, indent: int, loops: int, start: int, part: bool
    ) -> int:
        """Checks of the declared properties ``start:`` of object node ``nid`` (``v`` is a
        dict). Past the function's size budget, the rest go to "part" functions called one
        after another (not each from the previous: the call depth stays one), and a part
        itself stops there, returning the index it reached."""
        node = self.table.node(nid)
        required = frozenset(node.required)
        index, emitted = start, False
        while index < len(node.properties):
            name, child = node.properties[index]
            if self.table.trivial(child):
                index += 1
                continue
            if self.full() and (emitted or not part):
                if part:
                    return index
                depth = f"d + {k}" if k else "d"
                while index < len(node.properties):
                    rest, index = self.part(nid, index)
                    self.out(indent, f"if not {rest}({v}, {depth}): return False")
                return index
            emitted = True
            index += 1
            item = self.var()
            key = self.const(name)
            if name in required:
                self.out(indent, f"{item} = {v}[{key}]")
                self.child(child, item, k + 1, indent, loops)
            else:
                self.out(indent, f"{item} = {v}.get({key}, _M)")
                self.out(indent, f"if {item} is not _M:")
                self.child(child, item, k + 1, indent + 1, loops)
                self.out(indent + 1, "pass")
        return index

    def part(self, nid: int, start: int) -> tuple[str, int]:
        """Generate now a function checking properties ``start:`` of object node ``nid``
        up to its size budget; returns its name and the index where it stopped."""
        self.counter += 1
        name = f"_f{self.counter}"
        outer, self.lines = self.lines, [f"def {name}(x, d):"]
        end = self.emit_properties(nid, "x", 0, 1, 0, start, True)
        self.lines.append("    return True")
        self.finished.append(self.lines)
        self.lines = outer
        return name, end

    def emit_array(self, node: Node, v: str, k: int, indent: int, loops: int) -> None:
        if node.min_items is not None:
            self.out(indent, f"if len({v}) < {self.const(node.min_items)}: return False")
        if node.max_items is not None:
            self.out(indent, f"if len({v}) > {self.const(node.max_items)}: return False")
        if node.items is not None and not self.table.trivial(node.items):
            item = self.var()
            self.out(indent, f"for {item} in {v}:")
            self.child(node.items, item, k + 1, indent + 1, loops + 1)
            self.out(indent + 1, "pass")


def _has(node: Node, kind: str) -> bool:
    if kind == "string":
        return any(
            x is not None for x in (node.min_length, node.max_length, node.regex, node.format)
        )
    if kind == "number":
        return any(
            x is not None
            for x in (
                node.minimum,
                node.maximum,
                node.exclusive_minimum,
                node.exclusive_maximum,
                node.multiple_of,
            )
        )
    if kind == "object":
        return bool(node.required or node.properties) or node.additional is not None
    return node.min_items is not None or node.max_items is not None or node.items is not None


def generate(table: Table) -> tuple[Callable[[Any], bool], str]:
    """Generate the fast ``is_valid`` for a node table; returns it with its source text."""
    gen = _Gen(table)
    fn = gen.run()
    return fn, gen.source()
