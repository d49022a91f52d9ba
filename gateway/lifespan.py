"""The storage-backed services the HTTP app needs, opened once in its lifespan.

    services = await open_services(settings)
    principal = await services.keys.authenticate(secret)      # None -> 401
    decision = await services.limiter.check(principal, tokens)  # not allowed -> 429
    services.ledger.record(UsageRecord(...))                   # no I/O
    await services.aclose()                                     # flushes the ledger

The database schema must exist (``syntic migrate``); ``open_services`` does not migrate
unless asked (``migrate=True``, handy for tests and single-process dev setups).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.keys.store import DbKeyStore
from gateway.ratelimit.local import LocalRateLimiter
from gateway.ratelimit.redis import RedisRateLimiter
from gateway.settings import Settings
from gateway.storage import Database, data_dir_for, open_database
from gateway.storage.migrate import apply_migrations
from gateway.stored import DbResponseStore
from gateway.usage.ledger import DbLedger


@dataclass(frozen=True, slots=True)
class Services:
    """Keys, ledger, limiter, stored responses and the database handle they share."""

    keys: DbKeyStore
    ledger: DbLedger
    limiter: RedisRateLimiter | LocalRateLimiter
    db: Database
    responses: DbResponseStore

    async def aclose(self) -> None:
        """Flush the ledger (to the database; what it refuses stays in the spool), then close
        connections. Safe to call once at shutdown."""
        try:
            await self.ledger.aclose()
        finally:
            try:
                if isinstance(self.limiter, RedisRateLimiter):
                    await self.limiter.aclose()
            finally:
                await self.db.aclose()


async def open_services(settings: Settings, *, migrate: bool = False) -> Services:
    """Open the database (lazily connected: PostgreSQL may be down at start), start the
    ledger writer, and pick the rate limiter (Redis if ``settings.redis_url``)."""
    db = open_database(settings.database_url)
    if migrate:
        await apply_migrations(db)
    keys = DbKeyStore(db, settings.key_hash_secret, ttl_s=settings.key_cache_ttl_s)
    ledger = DbLedger(
        db,
        data_dir_for(settings.database_url, settings.env, settings.data_dir),
        flush_interval_s=settings.ledger_flush_interval_s,
        segment_bytes=settings.ledger_spool_segment_bytes,
        max_held_rows=settings.ledger_max_held_rows,
    )
    ledger.start()
    limiter: RedisRateLimiter | LocalRateLimiter
    limiter = (
        RedisRateLimiter(settings.redis_url, lease_max=settings.rate_limit_lease_max)
        if settings.redis_url
        else LocalRateLimiter()
    )
    responses = DbResponseStore(db, settings.responses_retention_s)
    return Services(keys=keys, ledger=ledger, limiter=limiter, db=db, responses=responses)
