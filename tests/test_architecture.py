"""The import direction of ARCHITECTURE.md, checked on the source (a contract, not a hope).

cli -> app -> dialects -> service -> enforcement / keys / usage -> upstream / storage ->
canonical / errors / settings; ``validator`` depends on nothing of ``gateway``; the three
dialects never import each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> prefixes it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "validator": ("gateway",),
    "gateway/canonical": ("gateway.",),
    "gateway/dialects/openai": ("gateway.dialects.anthropic", "gateway.dialects.responses"),
    "gateway/dialects/anthropic": ("gateway.dialects.openai", "gateway.dialects.responses"),
    "gateway/dialects/responses": ("gateway.dialects.openai", "gateway.dialects.anthropic"),
    "gateway/enforcement": (
        "gateway.dialects",
        "gateway.app",
        "gateway.middleware",
        "starlette",
    ),
    "gateway/upstream": ("gateway.dialects", "gateway.app", "gateway.service", "starlette"),
    "gateway/storage": ("gateway.dialects", "gateway.app", "gateway.service", "gateway.upstream"),
    "gateway/keys": ("gateway.dialects", "gateway.app", "gateway.service", "gateway.upstream"),
    "gateway/usage": ("gateway.dialects", "gateway.app", "gateway.service", "gateway.upstream"),
    "gateway/stored": ("gateway.dialects", "gateway.app", "gateway.service", "gateway.upstream"),
    "gateway/ratelimit": ("gateway.dialects", "gateway.app", "gateway.service"),
}
# gateway.canonical may import itself only
ALLOWED_SELF = {"gateway/canonical": "gateway.canonical"}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    bad = []
    for path in files:
        for line, module in _imports(path):
            own = ALLOWED_SELF.get(package)
            if own and module.startswith(own):
                continue
            for prefix in FORBIDDEN[package]:
                if module == prefix.rstrip(".") or module.startswith(prefix):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)
