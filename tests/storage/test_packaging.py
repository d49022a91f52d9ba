"""The migrations ship inside the built wheel, and an installed (non-editable) copy can
run ``syntic migrate`` from outside the repository."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_carries_migrations_and_installed_copy_migrates(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    # Build from a copy so parallel work in the tree doesn't leak build/ dirs into it.
    for name in ("pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, src / name)
    if not (src / "README.md").exists():
        (src / "README.md").write_text("x\n")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("gateway", "validator", "migrations"):
        shutil.copytree(REPO / pkg, src / pkg, symlinks=True, ignore=ignore)
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(dist.glob("syntic_gateway-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if n.startswith("gateway/migrations/")}
        repo_sql = sorted(p.name for p in (REPO / "migrations").glob("*.sql"))
        assert sorted(Path(n).name for n in shipped) == repo_sql
        for name in repo_sql:
            repo_bytes = (REPO / "migrations" / name).read_bytes()
            assert zf.read(f"gateway/migrations/{name}") == repo_bytes

    target = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    (target / "gateway" / "__pycache__").mkdir(exist_ok=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    env["PYTHONPATH"] = str(target)
    code = (
        "import gateway, sys; "
        f"assert gateway.__file__.startswith({str(target)!r}), gateway.__file__; "
        "from gateway.cli import main; sys.exit(main(['migrate']))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "applied 0001_initial" in run.stdout
    with sqlite3.connect(work / "var" / "syntic.db") as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == [p.split("_", 1)[0] for p in repo_sql]
