"""A migrated database of each backend (``db_url``): SQLite in a tmp dir, and a throwaway
PostgreSQL database per module (``pg_url``); see ``tests.support.databases``."""

from __future__ import annotations

from tests.support.databases import db_url, pg_url

__all__ = ["db_url", "pg_url"]
