"""Storage: one small async database interface, SQLite and PostgreSQL backends, migrations."""

from __future__ import annotations

from gateway.storage.base import (
    Database,
    Row,
    StorageDataError,
    StorageError,
    StorageUnavailable,
)
from gateway.storage.connect import data_dir_for, open_database

__all__ = [
    "Database",
    "Row",
    "StorageDataError",
    "StorageError",
    "StorageUnavailable",
    "data_dir_for",
    "open_database",
]
