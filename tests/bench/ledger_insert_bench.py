"""Ledger insert cost by request-id shape. A script, not collected::

    .venv/bin/python tests/bench/ledger_insert_bench.py [--rows 200000] [--batch 500]
        [--database-url sqlite:///tmp/x.db | postgresql://127.0.0.1:5432/test]

Writes ``--rows`` usage records in batches of ``--batch`` through the gateway's own
storage layer (the migrations' ``usage_records`` table, ``INSERT_SQL``, ``record_params``,
``Database.executemany``) twice: once with random 96-bit request ids (what the gateway
used before) and once with ``gateway.middleware.envelope.new_request_id`` (time-ordered). Prints the
microseconds per row, cumulative, at a few table sizes. The primary key is the request id:
random keys land anywhere in its B-tree, time-ordered ones at its end. Each run deletes
the rows it wrote (by a key id of its own), and only those.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gateway.middleware.envelope import new_request_id  # noqa: E402
from gateway.storage import open_database  # noqa: E402
from gateway.storage.migrate import apply_migrations  # noqa: E402
from gateway.usage.base import UsageRecord  # noqa: E402
from gateway.usage.ledger import INSERT_SQL, record_params  # noqa: E402


def _random_id(rng: random.Random) -> Callable[[], str]:
    return lambda: f"req_{rng.getrandbits(96):024x}"


async def _run(url: str, label: str, make_id: Callable[[], str], rows: int, batch: int) -> None:
    db = open_database(url)
    key_id = f"key_bench_{random.getrandbits(48):012x}"  # this run's rows, and only those
    try:
        await apply_migrations(db)
        spent = 0.0
        written = 0
        marks = {rows // 40, rows // 4, rows}
        while written < rows:
            now = time.time()
            params = [
                record_params(
                    UsageRecord(
                        request_id=make_id(),
                        key_id=key_id,
                        model="bench",
                        endpoint="/v1/chat/completions",
                        status=200,
                        error_code=None,
                        streamed=False,
                        prompt_tokens=10,
                        completion_tokens=5,
                        correction_prompt_tokens=0,
                        correction_completion_tokens=0,
                        schema_retries=0,
                        upstream_calls=1,
                        latency_ms=1.2,
                        started_at=now,
                        finished_at=now + 0.001,
                    )
                )
                for _ in range(min(batch, rows - written))
            ]
            start = time.perf_counter()
            await db.executemany(INSERT_SQL, params)
            spent += time.perf_counter() - start
            written += len(params)
            if written in marks:
                print(f"{label:12} {written:8} rows: {spent / written * 1e6:6.1f} us/row")
    finally:
        try:
            await db.execute("DELETE FROM usage_records WHERE key_id = ?", (key_id,))
        finally:
            await db.aclose()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--database-url", default="")
    ns = parser.parse_args()
    url = ns.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='ledger-bench-')}/l.db"
    print(f"database: {url.split('@')[-1]}")
    await _run(url, "random ids", _random_id(random.Random(1)), ns.rows, ns.batch)
    await _run(url, "ordered ids", new_request_id, ns.rows, ns.batch)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
