"""Figures for the storage-backed hot path (not a test; run by hand):

    .venv/bin/python tests/storage/bench_storage.py

Uses the real PostgreSQL and Redis on 127.0.0.1 (a throwaway database, dropped after)
and a SQLite file in a temp dir.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg

from gateway.keys.base import Principal
from gateway.keys.secrets import generate_key
from gateway.keys.store import DbKeyStore
from gateway.ratelimit.redis import RedisRateLimiter
from gateway.storage import open_database
from gateway.storage.migrate import apply_migrations
from gateway.usage.base import UsageRecord
from gateway.usage.ledger import DbLedger

PG = "postgresql://postgres@127.0.0.1:5432"


def rec(i: int) -> UsageRecord:
    now = time.time()
    return UsageRecord(
        f"b{i}",
        "key_b",
        "m",
        "/v1/chat/completions",
        200,
        None,
        False,
        10,
        5,
        0,
        0,
        0,
        1,
        3.0,
        now,
        now,
    )


async def backend(url: str, label: str, tmp: Path) -> None:
    db = open_database(url)
    await apply_migrations(db)
    store = DbKeyStore(db, "bench")
    keys = [(await store.create(f"k{i}")).secret for i in range(200)]
    t0 = time.perf_counter()
    for k in keys:
        await store.authenticate(k)
    cold = (time.perf_counter() - t0) / len(keys)
    t0 = time.perf_counter()
    n = 100_000
    for i in range(n):
        await store.authenticate(keys[i % len(keys)])
    warm = (time.perf_counter() - t0) / n
    bad = generate_key("live")[:-1] + "x"
    t0 = time.perf_counter()
    for _ in range(n):
        await store.authenticate(bad)
    malformed = (time.perf_counter() - t0) / n
    print(
        f"{label}: auth cold (db) {cold * 1e3:.2f} ms, cached {warm * 1e6:.1f} us, "
        f"malformed reject {malformed * 1e6:.1f} us"
    )

    ledger = DbLedger(db, tmp / label, batch_size=500, flush_interval_s=0.2)
    rows = 50_000
    records = [rec(i) for i in range(rows)]
    t0 = time.perf_counter()
    for r in records:
        ledger.record(r)
    enqueue = (time.perf_counter() - t0) / rows
    t0 = time.perf_counter()
    await ledger.aclose()
    flush = time.perf_counter() - t0
    print(
        f"{label}: ledger record() {enqueue * 1e6:.2f} us/row, "
        f"batched insert {rows / flush:,.0f} rows/s ({rows} rows in {flush:.2f} s)"
    )
    await db.aclose()


async def limiter() -> None:
    lim = RedisRateLimiter("redis://127.0.0.1:6379/0", prefix=f"bench_{secrets.token_hex(4)}:")
    p = Principal("key_bench", "b", rpm=10**9, tpm=10**12)
    lat = []
    for _ in range(3000):
        t0 = time.perf_counter()
        await lim.check(p, 100)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    t0 = time.perf_counter()
    await asyncio.gather(*(lim.check(p, 1) for _ in range(10_000)))
    conc = time.perf_counter() - t0
    await lim.aclose()
    print(
        f"redis limiter: check p50 {statistics.median(lat) * 1e3:.3f} ms, "
        f"p99 {lat[int(len(lat) * 0.99)] * 1e3:.3f} ms; 10,000 concurrent checks in "
        f"{conc:.2f} s ({10_000 / conc:,.0f}/s); fallbacks {lim.fallback_count}"
    )


async def main() -> None:
    name = f"syntic_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(f"{PG}/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            await backend(f"sqlite:///{tmp}/bench.db", "sqlite", Path(tmp))
            await backend(f"{PG}/{name}", "postgresql", Path(tmp))
        await limiter()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
