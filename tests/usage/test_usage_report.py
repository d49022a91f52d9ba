"""``syntic usage`` and the report API summarise exactly the ledger rows."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from gateway.storage import open_database
from gateway.usage.base import UsageRecord
from gateway.usage.ledger import DbLedger
from gateway.usage.report import parse_since, summarize


def _records(key: str) -> list[UsageRecord]:
    now = time.time()
    base = UsageRecord(
        request_id="",
        key_id=key,
        model="m1",
        endpoint="/v1/chat/completions",
        status=200,
        error_code=None,
        streamed=False,
        prompt_tokens=100,
        completion_tokens=20,
        correction_prompt_tokens=0,
        correction_completion_tokens=0,
        schema_retries=0,
        upstream_calls=1,
        latency_ms=5.0,
        started_at=now - 60,
        finished_at=now - 59,
    )
    variants = [
        {},
        {
            "schema_retries": 1,
            "upstream_calls": 2,
            "correction_prompt_tokens": 130,
            "correction_completion_tokens": 25,
        },
        {
            "status": 422,
            "error_code": "tool_arguments_invalid",
            "schema_retries": 1,
            "upstream_calls": 2,
            "correction_prompt_tokens": 150,
            "correction_completion_tokens": 30,
        },
        {
            "status": 400,
            "error_code": "invalid_request",
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "upstream_calls": 0,
        },
        {"status": 502, "error_code": "upstream_error", "completion_tokens": 0},
        {"model": "m2", "streamed": True},
        {"started_at": now - 7200, "finished_at": now - 7199},  # outside a -1h window
    ]
    return [
        dataclasses.replace(base, request_id=f"{key}_{i}", **v)  # type: ignore[arg-type]
        for i, v in enumerate(variants)
    ]


async def _write(db_url: str, records: list[UsageRecord], spool: Path) -> None:
    db = open_database(db_url)
    ledger = DbLedger(db, spool)
    for r in records:
        ledger.record(r)
    await ledger.aclose()
    await db.aclose()


def test_cli_summary_matches_rows(db_url: str, tmp_path: Path) -> None:
    key = f"key_{secrets.token_hex(8)}"
    records = _records(key)
    asyncio.run(_write(db_url, records, tmp_path))
    env = {**os.environ, "SYNTIC_DATABASE_URL": db_url}
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "usage", "--key", key, "--since", "-1h", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    by_model = {row["model"]: row for row in orjson.loads(out.stdout)}
    assert set(by_model) == {"m1", "m2"}
    in_window = [r for r in records if r.started_at > time.time() - 3600]
    for model, row in by_model.items():
        mine = [r for r in in_window if r.model == model]
        assert row["key_id"] == key
        assert row["requests"] == len(mine)
        assert row["unprocessable_422"] == sum(r.status == 422 for r in mine)
        assert row["errors_4xx"] == sum(400 <= r.status < 500 for r in mine)
        assert row["errors_5xx"] == sum(r.status >= 500 for r in mine)
        assert row["first_attempt_tokens"] == sum(
            r.prompt_tokens + r.completion_tokens for r in mine
        )
        assert row["correction_tokens"] == sum(
            r.correction_prompt_tokens + r.correction_completion_tokens for r in mine
        )
        assert row["schema_retries"] == sum(r.schema_retries for r in mine)
        assert row["streamed"] == sum(r.streamed for r in mine)
    assert by_model["m1"]["correction_rate"] == pytest.approx(2 / 5)

    table = subprocess.run(
        [sys.executable, "-m", "gateway", "usage", "--key", key],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert table.returncode == 0 and key in table.stdout


async def test_summarize_without_filters_includes_old_rows(db_url: str, tmp_path: Path) -> None:
    key = f"key_{secrets.token_hex(8)}"
    await _write(db_url, _records(key), tmp_path)
    db = open_database(db_url)
    try:
        rows = await summarize(db, key_id=key)
        assert sum(r.requests for r in rows) == 7
        assert await summarize(db, key_id=key, since=time.time() + 10) == []
    finally:
        await db.aclose()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-90s", 1000.0 - 90),
        ("-30m", 1000.0 - 1800),
        ("-1h", 1000.0 - 3600),
        ("-2d", 1000.0 - 172800),
        ("1970-01-01T00:10:00Z", 600.0),
        ("1970-01-01T00:10:00", 600.0),
        ("1970-01-01T01:10:00+01:00", 600.0),
        ("1970-01-02", 86400.0),
    ],
)
def test_parse_since(text: str, expected: float) -> None:
    assert parse_since(text, now=1000.0) == expected


@pytest.mark.parametrize("text", ["yesterday", "-1y", "1h", ""])
def test_parse_since_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_since(text, now=1000.0)
