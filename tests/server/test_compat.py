"""The framework versions ``gateway.server.compat`` assumes, checked against what is
installed: a routine upgrade outside them fails here, by name, before it breaks serving.
Framework internals are used there only (uvicorn's: ``tests/test_architecture.py``)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from gateway.server import compat


def test_installed_frameworks_are_the_assumed_ones() -> None:
    problems = compat.version_problems()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "installed, outside",
    [
        ({"uvicorn": "0.53.9"}, "uvicorn"),
        ({"uvicorn": "0.56.0"}, "uvicorn"),
        ({"uvicorn": "1.0"}, "uvicorn"),
    ],
)
def test_a_version_outside_the_assumed_range_is_named(
    installed: dict[str, str], outside: str
) -> None:
    problems = compat.version_problems(installed)
    assert len(problems) == 1
    lowest, first_not = compat.ASSUMED[outside]
    assert problems[0].startswith(f"{outside} {installed[outside]} is installed")
    assert f"{outside}>={lowest},<{first_not}" in problems[0]


def test_the_bounds_themselves() -> None:
    lowest = {name: low for name, (low, _) in compat.ASSUMED.items()}
    assert compat.version_problems(lowest) == []
    assert compat.version_problems({"uvicorn": "0.55.7rc1"}) == []
    assert set(compat.ASSUMED) == {"uvicorn"}  # Starlette: public API only
    for name in compat.ASSUMED:
        importlib.metadata.version(name)  # installed under that distribution name


# Starlette internals the gateway relies on, spelled as its code would use them.
STARLETTE_PRIVATE = ("._state", "build_middleware_stack", "ServerErrorMiddleware")


def private_uses(root: Path) -> list[str]:
    """``path: name`` for each Starlette internal named in a module under ``root``, but
    in ``server/compat.py``."""
    return [
        f"{path.relative_to(root)}: {name}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).parts[-2:] != ("server", "compat.py")
        for name in STARLETTE_PRIVATE
        if name in path.read_text()
    ]


def test_starlette_internals_are_used_in_compat_only() -> None:
    users = private_uses(Path(compat.__file__).resolve().parents[1])
    assert not users, "move these uses into gateway/server/compat.py:\n" + "\n".join(users)


def test_the_private_use_check_finds_a_use(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "compat.py").write_text("state._state = {}\n")
    assert private_uses(tmp_path) == []
    (tmp_path / "app.py").write_text("app.state._state['x'] = 1\n")
    assert private_uses(tmp_path) == ["app.py: ._state"]
