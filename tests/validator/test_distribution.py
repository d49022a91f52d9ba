"""``syntic-validator`` on its own: ``packages/validator`` builds a wheel of the repository's
``validator/`` tree, which installs into a fresh virtualenv with only orjson, google-re2
and idna (at the versions ``constraints.txt`` pins) and works there with no gateway
dependency present: the library's example and its command line run from outside the
checkout, so only the installed copy can be imported.

Needs PyPI (or pip's cache) for the build backend and the three dependencies, as every
install of the project does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "packages" / "validator"
DEPENDENCIES = {"orjson", "google-re2", "idna"}
# Distributions a fresh virtualenv has before anything is installed into it.
BASELINE = {"pip", "setuptools"}


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Without PYTHONPATH (the test run's points at the checkout): only what is installed.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the two directories it reads (so the build's own
    ``build/`` and ``*.egg-info`` never land in the checkout)."""
    tree = tmp_path_factory.mktemp("tree")
    shutil.copytree(
        ROOT / "validator", tree / "validator", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        PACKAGE,
        tree / "packages" / "validator",
        ignore=shutil.ignore_patterns("build", "*.egg-info"),
    )
    out = tmp_path_factory.mktemp("wheel")
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        "-w",
        out,
        tree / "packages" / "validator",
        cwd=tree,
    )
    [built] = out.glob("syntic_validator-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = tmp_path_factory.mktemp("env")
    _run(sys.executable, "-m", "venv", env, cwd=env)
    _run(
        env / "bin" / "python",
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "-c",
        ROOT / "constraints.txt",
        wheel,
        cwd=env,
    )
    return env


def test_the_wheel_holds_the_validator_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert packages == {"validator"}
    sources = {p.name for p in (ROOT / "validator").glob("*.py")}
    assert {Path(n).name for n in names if n.endswith(".py")} == sources
    assert "validator/py.typed" in names  # type checkers read its annotations


def test_only_its_three_dependencies_are_installed(venv: Path) -> None:
    listed = _run(
        venv / "bin" / "python",
        "-m",
        "pip",
        "list",
        "--format=freeze",
        "--disable-pip-version-check",
        cwd=venv,
    ).stdout
    installed = {canonicalize_name(line.split("==")[0]) for line in listed.split()}
    assert installed - BASELINE == {"syntic-validator", *DEPENDENCIES}


SCRIPT = """
import json, sys, validator
assert validator.__file__.startswith(sys.prefix), validator.__file__
for name in ("starlette", "uvicorn", "redis", "asyncpg", "aiohttp", "gateway"):
    try:
        __import__(name)
    except ImportError:
        continue
    raise SystemExit(f"{name} is importable")
schema = {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}},
          "required": ["url"]}
projected = validator.strictify(schema).schema
compiled = validator.compile(projected)
print(json.dumps({
    "errors": [e.message for e in compiled.validate_json(b'{"url": ""}')],
    "valid": compiled.validate_json(b'{"url": "https://example.org/"}'),
    "lint": [i.param for i in validator.lint(schema, path="p")],
    "copy": validator.anthropic_copy({"type": "integer", "minimum": 1}),
    "canonical": validator.canonicalize({"url": "https://example.org/", "x": None}, schema),
}))
"""


def test_it_works_with_no_gateway_dependency(venv: Path, tmp_path: Path) -> None:
    done = _run(venv / "bin" / "python", "-c", SCRIPT, cwd=tmp_path)
    assert done.stdout.strip() == (
        '{"errors": ["/url must be a valid uri"], "valid": [], "lint": ["p", "p.properties.url'
        '.format"], "copy": {"type": "integer", "description": "{minimum: 1}"}, "canonical": '
        '{"url": "https://example.org/", "x": null}}'
    )


def test_its_example_and_command_line_run_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    example = shutil.copy(ROOT / "examples" / "validator_library.py", tmp_path)
    done = _run(python, example, cwd=tmp_path)
    assert "lint refund: 0 issue(s)" in done.stdout
    schema = tmp_path / "tool.json"
    schema.write_text('{"type": "object", "properties": {"n": {"type": "integer"}}}')
    done = _run(python, "-m", "validator", "strictify", schema, cwd=tmp_path)
    assert json.loads(done.stdout)["properties"] == {"n": {"type": ["integer", "null"]}}


def test_its_dependencies_are_the_gateways_own() -> None:
    """The gateway ships the same tree, so it must require what the validator requires,
    in the same ranges (the pins in constraints.txt then serve both)."""
    own = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    gateway = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = {canonicalize_name(Requirement(r).name): str(r) for r in own["dependencies"]}
    assert set(requirements) == DEPENDENCIES
    root = {canonicalize_name(Requirement(r).name): str(r) for r in gateway["dependencies"]}
    assert {name: root.get(name) for name in requirements} == requirements
    assert own["version"] == gateway["version"]
    assert own["requires-python"] == gateway["requires-python"]


def test_it_imports_only_the_standard_library_and_its_dependencies() -> None:
    """Static, for every module (the fresh virtualenv only shows the ones a run reaches)."""
    import ast

    allowed = {"orjson", "re2", "idna", "validator", *sys.stdlib_module_names}
    found: dict[str, set[str]] = {}
    for path in (ROOT / "validator").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".", 1)[0]
                if top not in allowed:
                    found.setdefault(path.name, set()).add(top)
    assert found == {}
