"""Forward-only migrations: ``NNNN_slug.sql`` files, shipped inside the package.

The SQL files live in the repository's top-level ``migrations/`` directory; the build maps
that directory into the ``gateway.migrations`` package (see pyproject.toml), so an installed
wheel carries them. In a source checkout the top-level directory is used directly.
One SQL text serves both SQLite and PostgreSQL (portable types only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from gateway.storage.base import Database

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: ``0001_initial.sql`` -> version ``0001``, name ``initial``."""

    version: str
    name: str
    sql: str

    def statements(self) -> list[str]:
        """Split on ``;`` at the end of a line; ``--`` comment lines are dropped."""
        out: list[str] = []
        current: list[str] = []
        for line in self.sql.splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith("--"):
                continue
            current.append(line)
            if stripped.endswith(";"):
                out.append("\n".join(current).rstrip().rstrip(";"))
                current = []
        if current:
            out.append("\n".join(current))
        return out


def _source_dir() -> Traversable:
    packaged = resources.files("gateway") / "migrations"
    if packaged.is_dir() and any(p.name.endswith(".sql") for p in packaged.iterdir()):
        return packaged
    # Source checkout (editable install): the repository's top-level migrations/.
    return Path(__file__).resolve().parents[2] / "migrations"


def load_migrations(directory: Traversable | Path | None = None) -> list[Migration]:
    """Every migration, sorted by version. Versions must be unique."""
    source = directory if directory is not None else _source_dir()
    found: list[Migration] = []
    for entry in source.iterdir():
        m = _NAME.match(entry.name)
        if m is None:
            continue
        found.append(Migration(m.group(1), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"duplicate migration versions in {source}")
    return found


async def apply_migrations(db: Database, migrations: list[Migration] | None = None) -> list[str]:
    """Apply pending migrations; returns the versions applied now (empty on a re-run)."""
    migs = migrations if migrations is not None else load_migrations()
    return await db.migrate([(m.version, m.name, m.statements()) for m in migs])


async def applied_versions(db: Database) -> list[str]:
    """Versions recorded in ``schema_migrations`` (empty if the table doesn't exist yet)."""
    if not await _has_table(db):
        return []
    rows = await db.fetch("SELECT version FROM schema_migrations ORDER BY version")
    return [str(r[0]) for r in rows]


async def _has_table(db: Database) -> bool:
    if db.dialect == "sqlite":
        rows = await db.fetch(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        )
    else:
        rows = await db.fetch("SELECT to_regclass('schema_migrations') IS NOT NULL")
        return bool(rows and rows[0][0])
    return bool(rows)
