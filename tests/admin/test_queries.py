"""Ledger aggregates and the recent-requests query on both backends, with rows placed at
bucket edges (PostgreSQL rounds ``CAST(x AS INTEGER)``; the buckets must floor)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.admin.queries import (
    GROUP_COLUMNS,
    Aggregate,
    RequestFilter,
    Window,
    aggregate,
    recent_requests,
    usage_report,
)
from gateway.storage import open_database
from gateway.usage.base import UsageRecord
from gateway.usage.ledger import INSERT_SQL, record_params

HOUR = 3600
BASE = 472222 * HOUR  # a whole hour (2023-11-14T22:00Z)


def rec(n: int, at: float, **kw: Any) -> UsageRecord:
    fields: dict[str, Any] = dict(
        request_id=f"req_{n}",
        key_id="key_a",
        model="m1",
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
        latency_ms=12.5,
        started_at=at,
        finished_at=at + 0.1,
    )
    fields.update(kw)
    return UsageRecord(**fields)


ROWS = [
    rec(1, BASE + 10),
    rec(
        2,
        BASE + HOUR - 0.1,
        model="m2",
        schema_retries=1,
        upstream_calls=2,
        correction_prompt_tokens=20,
        correction_completion_tokens=3,
    ),  # last instant of hour 0
    rec(
        3,
        BASE + HOUR,
        key_id="key_b",
        status=422,
        error_code="tool_arguments_invalid",
        schema_retries=1,
        upstream_calls=2,
        correction_prompt_tokens=7,
        correction_completion_tokens=2,
        streamed=True,
    ),
    rec(
        4,
        BASE + 2 * HOUR - 1,
        key_id=None,
        model=None,
        status=401,
        error_code="invalid_api_key",
        prompt_tokens=0,
        completion_tokens=0,
        upstream_calls=0,
    ),
    rec(5, BASE + 2 * HOUR),  # == until: outside the window
    rec(6, BASE - 0.5),  # before since: outside
]
WINDOW = Window(BASE, BASE + 2 * HOUR)


@pytest.fixture(scope="module")
def ledger_url(empty_db_url: str) -> str:
    """The module's database with ``ROWS`` inserted once (the tests only read)."""

    async def insert() -> None:
        db = open_database(empty_db_url)
        try:
            await db.executemany(INSERT_SQL, [record_params(r) for r in ROWS])
        finally:
            await db.aclose()

    asyncio.run(insert())
    return empty_db_url


def by(aggs: list[Aggregate]) -> dict[tuple[Any, ...], Aggregate]:
    return {a.group: a for a in aggs}


async def test_totals_count_only_the_window(ledger_url: str) -> None:
    db = open_database(ledger_url)
    try:
        (total,) = await aggregate(db, WINDOW)
        assert (total.requests, total.errors_4xx, total.unprocessable_422) == (4, 2, 1)
        assert (total.corrected_requests, total.schema_retries, total.upstream_calls) == (2, 2, 5)
        assert (total.prompt_tokens, total.completion_tokens) == (30, 15)
        assert total.correction_tokens == 32 and total.first_attempt_tokens == 45
        assert total.correction_rate == 0.5 and total.unprocessable_rate == 0.25
        assert total.streamed == 1
        assert total.to_json()["latency_ms_avg"] == pytest.approx(12.5)
        (empty,) = await aggregate(db, Window(0, 1))
        assert empty.requests == 0 and empty.correction_rate == 0.0
    finally:
        await db.aclose()


async def test_hour_buckets_floor_at_the_edges(ledger_url: str) -> None:
    db = open_database(ledger_url)
    try:
        series = by(await aggregate(db, WINDOW, bucket_s=HOUR))
        assert sorted(series) == [(float(BASE),), (float(BASE + HOUR),)]
        assert series[(float(BASE),)].requests == 2  # BASE+3599.9 stays in the first hour
        assert series[(float(BASE + HOUR),)].requests == 2
        per_model = by(await aggregate(db, WINDOW, group_by="model", bucket_s=HOUR))
        assert set(per_model) == {
            (BASE, "m1"),
            (BASE, "m2"),
            (BASE + HOUR, "m1"),
            (BASE + HOUR, None),
        }
        assert per_model[(BASE, "m2")].correction_tokens == 23
    finally:
        await db.aclose()


@pytest.mark.parametrize(
    ("column", "want"),
    [
        ("key_id", {"key_a": 2, "key_b": 1, None: 1}),
        ("model", {"m1": 2, "m2": 1, None: 1}),
        ("status", {200: 2, 422: 1, 401: 1}),
        ("error_code", {None: 2, "tool_arguments_invalid": 1, "invalid_api_key": 1}),
        ("endpoint", {"/v1/chat/completions": 4}),
    ],
)
async def test_group_by_each_column(ledger_url: str, column: Any, want: dict[Any, int]) -> None:
    db = open_database(ledger_url)
    try:
        got = {a.group[0]: a.requests for a in await aggregate(db, WINDOW, group_by=column)}
        assert got == want
        only = await aggregate(db, WINDOW, group_by=column, key_id="key_a", model="m2")
        assert [a.requests for a in only] == [1]
    finally:
        await db.aclose()


async def test_recent_requests_newest_first_with_filters(ledger_url: str) -> None:
    db = open_database(ledger_url)
    try:

        async def ids(**kw: Any) -> list[str]:
            limit = kw.pop("limit", 100)
            return [
                r["request_id"] for r in await recent_requests(db, RequestFilter(**kw), limit=limit)
            ]

        assert await ids() == ["req_5", "req_4", "req_3", "req_2", "req_1", "req_6"]
        assert await ids(key_id="key_b") == ["req_3"]
        assert await ids(model="m2") == ["req_2"]
        assert await ids(error_code="") == ["req_5", "req_2", "req_1", "req_6"]
        assert await ids(error_code="invalid_api_key") == ["req_4"]
        assert await ids(status=422) == ["req_3"]
        assert await ids(before=BASE + HOUR, limit=2) == ["req_2", "req_1"]
        (row,) = await recent_requests(db, RequestFilter(key_id="key_b"))
        assert row["streamed"] is True and row["estimated"] is False
        assert row["correction_prompt_tokens"] == 7 and row["started_at"] == BASE + HOUR
    finally:
        await db.aclose()


async def test_usage_report_folds_to_the_per_view_queries(ledger_url: str) -> None:
    db = open_database(ledger_url)
    try:
        report = await usage_report(db, WINDOW, bucket_s=HOUR)
        assert report.totals == (await aggregate(db, WINDOW))[0]
        for column in GROUP_COLUMNS:
            direct = await aggregate(db, WINDOW, group_by=column)
            assert sorted(report.by[column], key=repr) == sorted(direct, key=repr)
            values = [a.group[0] for a in report.by[column]]
            assert None not in values[:-1]  # NULL sorts last on both backends
        views: list[tuple[list[Aggregate], Any]] = [
            (report.series_total, None),
            (report.series_by_model, "model"),
            (report.series_by_key, "key_id"),
        ]
        for folded, column in views:
            direct = await aggregate(db, WINDOW, group_by=column, bucket_s=HOUR)
            assert sorted(folded, key=repr) == sorted(direct, key=repr)
        only = await usage_report(db, WINDOW, bucket_s=HOUR, key_id="key_a")
        assert only.totals.requests == 2
        assert [a.group for a in only.by["model"]] == [("m1",), ("m2",)]
        empty = await usage_report(db, Window(0, 1), bucket_s=HOUR)
        assert empty.totals.requests == 0 and empty.series_total == []
        assert all(rows == [] for rows in empty.by.values())
    finally:
        await db.aclose()
