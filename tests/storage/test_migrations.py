"""Migrations on empty SQLite and PostgreSQL, idempotent re-runs, concurrent migrators."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.storage import open_database
from gateway.storage.migrate import Migration, applied_versions, apply_migrations, load_migrations
from gateway.storage.postgres import to_dollar_params

REPO = Path(__file__).resolve().parents[2]
SYNTIC = [sys.executable, "-m", "gateway"]


async def _tables(url: str) -> set[str]:
    db = open_database(url)
    try:
        if db.dialect == "sqlite":
            rows = await db.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            rows = await db.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {str(r[0]) for r in rows}
    finally:
        await db.aclose()


async def test_migrations_apply_on_empty_db_and_rerun_is_noop(empty_db_url: str) -> None:
    expected = [m.version for m in load_migrations()]
    db = open_database(empty_db_url)
    try:
        assert await applied_versions(db) == []
        assert await apply_migrations(db) == expected
        assert await applied_versions(db) == expected
        assert await apply_migrations(db) == []  # idempotent
        assert await applied_versions(db) == expected
    finally:
        await db.aclose()
    assert {"schema_migrations", "api_keys", "usage_records", "responses"} <= await _tables(
        empty_db_url
    )


def test_cli_migrate_twice(empty_db_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "SYNTIC_DATABASE_URL": empty_db_url}
    env.pop("SYNTIC_CONFIG", None)
    first = subprocess.run(
        [*SYNTIC, "migrate"], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert first.returncode == 0, first.stderr
    assert "applied 0001_initial" in first.stdout
    second = subprocess.run(
        [*SYNTIC, "migrate"], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert second.returncode == 0, second.stderr
    assert "applied" not in second.stdout.replace("0 applied now", "")
    status = subprocess.run(
        [*SYNTIC, "migrate", "--status"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert "0001_initial  applied" in status.stdout


def test_default_database_is_sqlite_under_cwd_var(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    proc = subprocess.run(
        [*SYNTIC, "migrate"], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "var" / "syntic.db").is_file()


def test_concurrent_migrators_apply_each_version_once(
    pg_factory: Callable[[], str], tmp_path: Path
) -> None:
    """Four processes migrate one empty PostgreSQL database at once (advisory lock)."""
    url = pg_factory()
    env = {**os.environ, "SYNTIC_DATABASE_URL": url}
    procs = [
        subprocess.Popen(
            [*SYNTIC, "migrate"],
            env=env,
            cwd=tmp_path,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e for _, e in outs]
    migrations = load_migrations()
    for m in migrations:
        name = f"{m.version}_{m.name}"
        assert sum(o.count(f"applied {name}") for o, _ in outs) == 1, name

    async def rows() -> list[tuple[object, ...]]:
        db = open_database(url)
        try:
            return await db.fetch("SELECT version FROM schema_migrations ORDER BY version")
        finally:
            await db.aclose()

    assert asyncio.run(rows()) == [(m.version,) for m in migrations]


def test_failed_migration_rolls_back_and_is_not_recorded(tmp_path: Path) -> None:
    bad = [
        Migration("0001", "ok", "CREATE TABLE a (x INTEGER);"),
        Migration("0002", "broken", "CREATE TABLE b (x INTEGER);\nCREATE TABLE a (x INTEGER);"),
    ]

    async def go() -> tuple[list[str], set[str]]:
        db = open_database(f"sqlite:///{tmp_path}/m.db")
        try:
            with pytest.raises(Exception, match="already exists"):
                await apply_migrations(db, bad)
            names = {
                str(r[0])
                for r in await db.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            return await applied_versions(db), names
        finally:
            await db.aclose()

    versions, tables = asyncio.run(go())
    assert versions == ["0001"]
    assert "a" in tables and "b" not in tables  # 0002 rolled back as a whole


def test_migration_files_are_well_formed() -> None:
    migs = load_migrations(REPO / "migrations")
    assert [m.version for m in migs] == sorted({m.version for m in migs})
    assert next(m.version for m in migs) == "0001"
    for m in migs:
        assert m.statements(), m.name
        assert all(";" not in s.rstrip()[-1:] for s in m.statements())


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "-- c\nCREATE TABLE a (x INT);\n\nCREATE INDEX i ON a (x);\n",
            ["CREATE TABLE a (x INT)", "CREATE INDEX i ON a (x)"],
        ),
        ("CREATE TABLE a (\n  x INT\n);", ["CREATE TABLE a (\n  x INT\n)"]),
        ("-- only a comment\n", []),
    ],
)
def test_statement_splitting(sql: str, expected: list[str]) -> None:
    assert Migration("0001", "x", sql).statements() == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT ?", "SELECT $1"),
        ("INSERT INTO t VALUES (?, ?, ?)", "INSERT INTO t VALUES ($1, $2, $3)"),
        ("SELECT '?' , ?", "SELECT '?' , $1"),
        ("SELECT 1", "SELECT 1"),
    ],
)
def test_placeholder_rewrite(sql: str, expected: str) -> None:
    assert to_dollar_params(sql) == expected
