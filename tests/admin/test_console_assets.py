"""The console's static files: shipped in the package, referenced consistently, and free of
the constructs the CSP forbids or that would render data as markup."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from gateway.admin.console import CSP, console_assets

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "gateway" / "static" / "console"
FILES = sorted(p.name for p in CONSOLE.iterdir() if p.is_file())


def test_every_console_file_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["gateway"]
    for name in FILES:
        rel = f"static/console/{name}"
        assert any(
            fnmatch.fnmatch(rel, p) and "/" not in p.replace("static/console/", "", 1)
            for p in patterns
        ), rel


def test_assets_served_are_the_shipped_files() -> None:
    assert sorted(console_assets()) == FILES
    assert console_assets()["index.html"].media_type.startswith("text/html")


def test_index_references_only_shipped_files_and_nothing_inline() -> None:
    html = (CONSOLE / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="/console/([^"]+)"', html)
    assert refs and set(refs) <= set(FILES)
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline script (blocked by the CSP)"
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+=", html), "inline event handler (blocked by the CSP)"
    assert "'unsafe-inline'" not in CSP and "'unsafe-eval'" not in CSP


@pytest.mark.parametrize("name", [n for n in FILES if n.endswith(".js")])
def test_scripts_never_render_data_as_markup(name: str) -> None:
    source = (CONSOLE / name).read_text()
    for banned in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "localStorage",
        'setAttribute("style"',
    ):
        assert banned not in source, f"{name} uses {banned}"
