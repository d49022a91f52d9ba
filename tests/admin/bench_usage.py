"""Time the queries behind ``GET /admin/usage`` and ``GET /admin/requests`` on N synthetic
ledger rows (7 days, 50 keys, 5 models), on SQLite and PostgreSQL. Not collected by pytest.

    .venv/bin/python -m tests.admin.bench_usage 100000
"""

from __future__ import annotations

import asyncio
import random
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import asyncpg

from gateway.admin.queries import RequestFilter, Window, recent_requests, usage_report
from gateway.storage import open_database
from gateway.storage.migrate import apply_migrations
from gateway.usage.base import UsageRecord
from gateway.usage.ledger import INSERT_SQL, record_params

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


def rows(n: int, now: float) -> Iterator[tuple[Any, ...]]:
    rnd = random.Random(1)
    statuses = [200] * 90 + [422] * 3 + [400] * 4 + [502] * 3
    for i in range(n):
        status = rnd.choice(statuses)
        corrected = rnd.random() < 0.1
        started = now - rnd.random() * 7 * 86400
        yield record_params(
            UsageRecord(
                request_id=f"req_{i}",
                key_id=f"key_{rnd.randrange(50)}",
                model=f"m{rnd.randrange(5)}",
                endpoint="/v1/chat/completions",
                status=status,
                error_code=None if status == 200 else f"code_{status}",
                streamed=False,
                prompt_tokens=100,
                completion_tokens=20,
                correction_prompt_tokens=50 if corrected else 0,
                correction_completion_tokens=0,
                schema_retries=int(corrected),
                upstream_calls=1 + int(corrected),
                latency_ms=30.0,
                started_at=started,
                finished_at=started + 0.03,
            )
        )


async def run(url: str, n: int) -> None:
    db = open_database(url)
    try:
        await apply_migrations(db)
        now = time.time()
        batch = list(rows(n, now))
        for i in range(0, len(batch), 5000):
            await db.executemany(INSERT_SQL, batch[i : i + 5000])
        for label, span, bucket in (("24h/5m", 86400, 300), ("7d/1h", 7 * 86400, 3600)):
            start = time.perf_counter()
            await usage_report(db, Window(now - span, now + 1), bucket_s=bucket)
            ms = 1000 * (time.perf_counter() - start)
            print(f"{db.dialect:10} N={n} usage {label}: {ms:.0f} ms")
        start = time.perf_counter()
        await recent_requests(db, RequestFilter(key_id="key_7"), limit=100)
        ms = 1000 * (time.perf_counter() - start)
        print(f"{db.dialect:10} N={n} requests by key, 100 rows: {ms:.1f} ms")
    finally:
        await db.aclose()


async def pg(sql: str) -> None:
    conn = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await run(f"sqlite:///{tmp}/bench.db", n)
    name = f"syntic_adminbench_{secrets.token_hex(4)}"
    await pg(f'CREATE DATABASE "{name}"')
    try:
        await run(f"{PG_SERVER}/{name}", n)
    finally:
        await pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
