"""Pick a backend from ``SYNTIC_DATABASE_URL`` and find the local data directory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gateway.storage.base import Database


class DatabaseUrlError(ValueError):
    """The database URL names no supported backend."""


def sqlite_path(url: str) -> str:
    """``sqlite:///var/syntic.db`` -> ``var/syntic.db`` (relative to cwd);
    ``sqlite:////abs/x.db`` -> ``/abs/x.db``; ``sqlite://:memory:`` -> ``:memory:``."""
    rest = url[len("sqlite:") :]
    if rest.startswith("///"):
        return rest[3:]
    if rest.startswith("//"):
        return rest[2:]
    return rest


def open_database(url: str) -> Database:
    """A database handle for ``sqlite:///path`` or ``postgresql://...`` (lazily connected)."""
    if url.startswith("sqlite:"):
        from gateway.storage.sqlite import SQLiteDatabase

        return SQLiteDatabase(sqlite_path(url))
    if url.startswith(("postgresql://", "postgres://")):
        from gateway.storage.postgres import PostgresDatabase

        return PostgresDatabase(url)
    raise DatabaseUrlError(
        "SYNTIC_DATABASE_URL must start with sqlite:/// or postgresql:// "
        f"(got scheme {url.split(':', 1)[0]!r})"
    )


def data_dir_for(database_url: str, env: Mapping[str, str], configured: str | None = None) -> Path:
    """Where local files (the ledger spool) live: ``SYNTIC_DATA_DIR``, else ``configured``
    (``[server] data_dir``), else the SQLite file's directory, else ``./var``."""
    explicit = env.get("SYNTIC_DATA_DIR") or configured
    if explicit:
        return Path(explicit)
    if database_url.startswith("sqlite:"):
        path = sqlite_path(database_url)
        if path != ":memory:":
            return Path(path).parent
    return Path("var")
