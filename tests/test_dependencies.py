"""Dependencies stay in the range that is tested: every requirement in ``pyproject.toml``
has an upper bound and is pinned in ``constraints.txt`` at a version inside its range, and
the install commands (CI, ``scripts/run``, ``scripts/test``, the image) use that file."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
UPPER = {"<", "<=", "==", "===", "~="}  # operators that stop a future major from coming in


def _constraints() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for n, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;=]+)", text)
        assert match, f"constraints.txt:{n}: not an exact name==version pin: {line!r}"
        name = canonicalize_name(match[1])
        assert name not in pins, f"constraints.txt:{n}: {name} pinned twice"
        pins[name] = Version(match[2])
    return pins


def _requirements(*groups: str) -> list[Requirement]:
    out: list[Requirement] = []
    for group in groups:
        raw = (
            PROJECT["dependencies"]
            if group == "runtime"
            else (PROJECT["optional-dependencies"][group])
        )
        out.extend(Requirement(r) for r in raw)
    return out


TESTED = _requirements("runtime", "test")


@pytest.mark.parametrize("req", TESTED, ids=str)
def test_requirement_is_bounded_and_pinned_inside_its_range(req: Requirement) -> None:
    ops = {spec.operator for spec in req.specifier}
    assert ops & UPPER, f"{req}: no upper bound; add <next major (next minor for 0.x)"
    assert ">=" in ops or "==" in ops, f"{req}: no lower bound at the tested version"
    pins = _constraints()
    name = canonicalize_name(req.name)
    assert name in pins, f"{req.name} is not pinned in constraints.txt: regenerate it"
    assert req.specifier.contains(pins[name], prereleases=True), (
        f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {req.specifier}"
    )


def test_the_tested_lower_bound_is_the_pinned_release_line() -> None:
    # ">=x" says what is tested: x must be the pinned version's release line, not older.
    pins = _constraints()
    stale = []
    for req in TESTED:
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            continue  # reported by the test above
        for spec in req.specifier:
            floor = Version(spec.version)
            depth = len(floor.release)
            if spec.operator == ">=" and pinned.release[:depth] != floor.release:
                stale.append(f"{req.name}: >={floor} but tested {pinned}")
    assert not stale, stale


def test_local_extra_pins_the_runtime_the_build_script_builds() -> None:
    (llama,) = [r for r in _requirements("local") if r.name == "llama-cpp-python"]
    script = (ROOT / "scripts" / "build-local-runtime").read_text()
    match = re.search(r"^VERSION=(\S+)$", script, re.MULTILINE)
    assert match, "scripts/build-local-runtime sets no VERSION"
    assert str(llama.specifier) == f"=={match[1]}"


@pytest.mark.parametrize("path", [".ci/run", "scripts/run", "scripts/test", "deploy/Dockerfile"])
def test_installs_use_the_constraints_file(path: str) -> None:
    lines = [
        line
        for line in (ROOT / path).read_text().splitlines()
        if re.search(r"pip (install|wheel)\b.*(-e|\s\.\s*$|'\.\[)", line)
    ]
    assert lines, f"{path}: no install of the project found"
    for line in lines:
        assert "-c constraints.txt" in line, f"{path}: installs without the pins: {line.strip()}"
