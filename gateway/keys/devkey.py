"""A dev key on first start, so ``scripts/run`` with no config just works.

``ensure_dev_key`` migrates the database, and when it holds no active key creates one named
``dev`` and returns its secret (shown once; only its hash is stored). Otherwise it returns
None and changes nothing. ``syntic keys ensure-dev`` (run by ``scripts/run``) calls it.

Example::

    secret = ensure_dev_key(settings)
    if secret is not None:
        print(f"dev key (shown once): {secret}")
"""

from __future__ import annotations

import asyncio

from gateway.keys.store import DbKeyStore
from gateway.settings import Settings
from gateway.storage import open_database
from gateway.storage.migrate import apply_migrations

DEV_KEY_NAME = "dev"


async def ensure_dev_key_async(settings: Settings) -> str | None:
    """The async form of ``ensure_dev_key`` (for callers already in an event loop)."""
    db = open_database(settings.database_url)
    try:
        await apply_migrations(db)
        store = DbKeyStore(db, settings.key_hash_secret, ttl_s=settings.key_cache_ttl_s)
        if await store.list(include_revoked=False):
            return None
        created = await store.create(DEV_KEY_NAME, kind="live")
        return created.secret
    finally:
        await db.aclose()


def ensure_dev_key(settings: Settings) -> str | None:
    """A new ``sk_live_`` key when the database has no active key, else None."""
    return asyncio.run(ensure_dev_key_async(settings))
