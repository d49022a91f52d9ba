"""The import direction of ARCHITECTURE.md, checked on the source (a contract, not a hope).

Every module of ``gateway`` belongs to one layer (``LAYERS``, top first) and imports only
its own layer or the ones below it::

    cli / commands -> app / lifespan -> dialects / routes / middleware / admin
      -> web / observability -> service -> enforcement / keys / usage / ratelimit
      -> upstream / storage / server -> context (+ the seams it names)
      -> canonical / errors / settings

and, besides: ``validator`` imports nothing of ``gateway``; ``gateway.canonical`` imports
only itself; the dialects never import each other; ``gateway.web`` imports no middleware;
only ``gateway.server.compat`` imports uvicorn's internals (its submodules); there is no
import cycle among gateway modules (module-level imports, ``TYPE_CHECKING`` ones
included). The last tests run each rule on a graph with one bad edge, so none of them
can pass by checking nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Top first. A module belongs to the layer of its longest matching prefix (``name:``
# matches that module only: the package ``gateway`` itself, not all of it).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("gateway.__main__", "gateway.cli", "gateway.commands"),
    ("gateway.app", "gateway.lifespan"),
    ("gateway.dialects", "gateway.routes", "gateway.middleware", "gateway.admin"),
    ("gateway.web", "gateway.observability"),
    ("gateway.service",),
    ("gateway.enforcement", "gateway.keys", "gateway.usage", "gateway.ratelimit", "gateway.stored"),
    ("gateway.upstream", "gateway.storage", "gateway.server"),
    # The request's bookkeeping and the seams it names: plain data, like canonical.
    ("gateway.context", "gateway.keys.base", "gateway.usage.base", "gateway.ratelimit.base"),
    (
        "gateway.canonical",
        "gateway.errors",
        "gateway.settings",
        "gateway.engines",
        "gateway.bounds",
        "gateway.offload",
        "gateway:",
    ),
)

# module prefix -> prefixes it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "validator": ("gateway",),
    "gateway.dialects.openai": ("gateway.dialects.anthropic", "gateway.dialects.responses"),
    "gateway.dialects.anthropic": ("gateway.dialects.openai", "gateway.dialects.responses"),
    "gateway.dialects.responses": ("gateway.dialects.openai", "gateway.dialects.anthropic"),
    "gateway.web": ("gateway.middleware",),
    "gateway.enforcement": ("starlette",),
    "gateway.upstream": ("starlette",),
    "gateway.storage": ("gateway.upstream",),
}
# gateway.canonical may import nothing of gateway but itself
SELF_CONTAINED = ("gateway.canonical",)
# The one module that may import uvicorn's internals (anything below ``uvicorn``).
UVICORN_INTERNALS = "gateway.server.compat"


@dataclass(frozen=True, slots=True)
class Import:
    line: int
    module: str
    top_level: bool  # executed when the importing module is (not inside a function)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: set[str]) -> None:
        self.module = module
        self.is_package = is_package
        self.known = known
        self.depth = 0  # functions entered
        self.found: list[Import] = []

    def _visit_function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append(Import(node.lineno, alias.name, self.depth == 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = _resolve(node, self.module, self.is_package)
        self.found.append(Import(node.lineno, target, self.depth == 0))
        for alias in node.names:  # ``from gateway.x import y`` where y is a module
            sub = f"{target}.{alias.name}"
            if sub in self.known:
                self.found.append(Import(node.lineno, sub, self.depth == 0))


def _sources(*packages: str) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def import_graph(*packages: str) -> dict[str, list[Import]]:
    """Every module of ``packages`` -> the imports its source makes."""
    sources = _sources(*packages)
    known = set(sources)
    graph: dict[str, list[Import]] = {}
    for module, path in sources.items():
        collector = _Collector(module, path.name == "__init__.py", known)
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        graph[module] = collector.found
    return graph


def _matches(module: str, prefix: str) -> bool:
    if prefix.endswith(":"):
        return module == prefix[:-1]
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if _matches(module, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def _own(module: str) -> bool:
    return _matches(module, "gateway")


def layer_violations(graph: Mapping[str, Iterable[Import]]) -> list[str]:
    bad = []
    for module, imports in graph.items():
        if not _own(module):
            continue
        mine = layer_of(module)
        if mine is None:
            bad.append(f"{module} is in no layer: give it one in LAYERS")
            continue
        for imp in imports:
            theirs = layer_of(imp.module) if _own(imp.module) else None
            if theirs is not None and theirs < mine:
                bad.append(f"{module}:{imp.line} imports {imp.module}, a layer above it")
    return bad


def forbidden_violations(graph: Mapping[str, Iterable[Import]]) -> list[str]:
    bad = []
    for module, imports in graph.items():
        for imp in imports:
            for owner, prefixes in FORBIDDEN.items():
                if _matches(module, owner) and any(_matches(imp.module, p) for p in prefixes):
                    bad.append(f"{module}:{imp.line} imports {imp.module}")
            for owner in SELF_CONTAINED:
                if _matches(module, owner) and _own(imp.module) and not _matches(imp.module, owner):
                    bad.append(f"{module}:{imp.line} imports {imp.module} (self-contained)")
            if imp.module.startswith("uvicorn.") and module != UVICORN_INTERNALS:
                bad.append(
                    f"{module}:{imp.line} imports {imp.module}: uvicorn internals "
                    f"go through {UVICORN_INTERNALS}"
                )
    return bad


def import_cycles(graph: Mapping[str, Iterable[Import]]) -> list[list[str]]:
    """The cycles among own modules through module-level imports (one per cycle found)."""
    edges = {
        module: sorted(
            {i.module for i in imports if i.top_level and i.module in graph and i.module != module}
        )
        for module, imports in graph.items()
        if _own(module)
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in edges.get(module, ()):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)
    return cycles


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Import]]:
    return import_graph("gateway", "validator")


def test_every_gateway_module_is_in_a_layer(graph: dict[str, list[Import]]) -> None:
    assert len([m for m in graph if _own(m)]) > 100  # the walk found the source
    missing = [m for m in graph if _own(m) and layer_of(m) is None]
    assert not missing, missing


def test_imports_go_down_the_layers(graph: dict[str, list[Import]]) -> None:
    bad = layer_violations(graph)
    assert not bad, "\n".join(bad)


def test_forbidden_imports(graph: dict[str, list[Import]]) -> None:
    bad = forbidden_violations(graph)
    assert not bad, "\n".join(bad)


def test_no_import_cycles(graph: dict[str, list[Import]]) -> None:
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


# Each rule, shown to fail on the real graph plus one bad edge.


def _with(graph: Mapping[str, list[Import]], module: str, *targets: str) -> dict[str, list[Import]]:
    changed = {m: list(imports) for m, imports in graph.items()}
    changed.setdefault(module, []).extend(Import(1, t, True) for t in targets)
    return changed


@pytest.mark.parametrize(
    "module, target",
    [
        ("gateway.app", "gateway.commands.serve"),  # the app importing the CLI
        ("gateway.service", "gateway.dialects.openai.endpoint"),
        ("gateway.upstream.retry", "gateway.service"),
        ("gateway.storage.postgres", "gateway.keys.store"),
        ("gateway.canonical.model", "gateway.context"),
        ("gateway.context", "gateway.keys.store"),
        ("gateway.web", "gateway.routes.health"),
    ],
)
def test_an_upward_import_fails(graph: dict[str, list[Import]], module: str, target: str) -> None:
    assert layer_violations(_with(graph, module, target))


def test_a_module_without_layer_fails(graph: dict[str, list[Import]]) -> None:
    assert layer_violations(_with(graph, "gateway.nowhere")) == [
        "gateway.nowhere is in no layer: give it one in LAYERS"
    ]
    assert layer_of("gateway") == len(LAYERS) - 1


@pytest.mark.parametrize(
    "module, target",
    [
        ("validator._compile", "gateway.errors"),
        ("gateway.dialects.openai.decode", "gateway.dialects.anthropic.decode"),
        ("gateway.dialects.anthropic.encode", "gateway.dialects.openai.encode"),
        ("gateway.web", "gateway.middleware.envelope"),
        ("gateway.canonical.model", "gateway.errors"),
        ("gateway.enforcement.check", "starlette.requests"),
        ("gateway.middleware.envelope", "uvicorn.protocols.utils"),
        ("gateway.server.protocol", "uvicorn.server"),
    ],
)
def test_a_forbidden_import_fails(graph: dict[str, list[Import]], module: str, target: str) -> None:
    assert forbidden_violations(_with(graph, module, target))


def test_a_cycle_fails(graph: dict[str, list[Import]]) -> None:
    web_imports_context = any(
        i.module == "gateway.context" and i.top_level for i in graph["gateway.web"]
    )
    assert web_imports_context  # the edge the bad one closes
    cycles = import_cycles(_with(graph, "gateway.context", "gateway.web"))
    assert {"gateway.context", "gateway.web"} in [set(cycle) for cycle in cycles]
    lazy = {m: list(i) for m, i in graph.items()}
    lazy["gateway.context"] = [*lazy["gateway.context"], Import(1, "gateway.web", False)]
    assert not import_cycles(lazy)  # an import inside a function is not a cycle
