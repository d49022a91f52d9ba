"""``syntic migrate [--status]``: apply the forward-only migrations.

Also hosts the small helpers the storage-backed commands (keys, usage) share.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gateway.settings import ConfigError, Settings, load_settings
from gateway.storage import Database, StorageError, open_database
from gateway.storage.connect import DatabaseUrlError
from gateway.storage.migrate import applied_versions, apply_migrations, load_migrations

T = TypeVar("T")


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """``--config PATH`` (else ``SYNTIC_CONFIG``); the database comes from
    ``SYNTIC_DATABASE_URL`` or the config's ``[server] database_url``."""
    parser.add_argument("--config", default=None, help="config file (default: $SYNTIC_CONFIG)")


def run_with_db(
    prog: str, args: argparse.Namespace, body: Callable[[Settings, Database], Awaitable[T]]
) -> tuple[int, T | None]:
    """Load settings, open the database, run ``body``, close; errors become exit code 1
    with a one-line message on stderr (never a traceback, never a secret)."""

    async def main(settings: Settings) -> T:
        db = open_database(settings.database_url)
        try:
            return await body(settings, db)
        finally:
            await db.aclose()

    try:
        settings = load_settings(getattr(args, "config", None))
        return 0, asyncio.run(main(settings))
    except (ConfigError, DatabaseUrlError, StorageError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1, None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("migrate", help="apply database migrations")
    add_config_option(parser)
    parser.add_argument(
        "--status", action="store_true", help="list applied and pending migrations, change nothing"
    )
    parser.set_defaults(func=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    async def body(settings: Settings, db: Database) -> int:
        migrations = load_migrations()
        if args.status:
            done = set(await applied_versions(db))
            for m in migrations:
                state = "applied" if m.version in done else "pending"
                print(f"{m.version}_{m.name}  {state}")
            return 0
        applied = await apply_migrations(db, migrations)
        for version in applied:
            name = next(m.name for m in migrations if m.version == version)
            print(f"applied {version}_{name}")
        print(f"database is up to date ({len(migrations)} migrations, {len(applied)} applied now)")
        return 0

    code, _ = run_with_db("syntic migrate", args, body)
    return code
