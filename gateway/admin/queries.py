"""Ledger queries behind ``GET /admin/usage`` and ``GET /admin/requests``.

Written once for both backends through ``gateway.storage.Database``: only the time-bucket
expression differs (``CAST(x AS INTEGER)`` truncates on SQLite, but *rounds* on
PostgreSQL, so PostgreSQL uses ``FLOOR``). Grouping columns and bucket widths come from
allow-lists and are the only text ever formatted into SQL; every value is a parameter.

    totals = await aggregate(db, Window(since, until))                  # one row
    by_key = await aggregate(db, window, group_by="key_id")             # one row per key
    series = await aggregate(db, window, group_by="model", bucket_s=3600)
    report = await usage_report(db, window, bucket_s=300)               # all of /admin/usage
    rows = await recent_requests(db, RequestFilter(key_id="key_..."), limit=50)

The ledger holds no prompts or completions, so nothing here can leak one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from gateway.storage.base import Database, Row
from gateway.usage.report import COUNTERS, TOTALS_SQL, LedgerTotals

GroupColumn = Literal["key_id", "model", "endpoint", "status", "error_code"]
GROUP_COLUMNS: tuple[GroupColumn, ...] = ("key_id", "model", "endpoint", "status", "error_code")

# Bucket widths the API accepts (name -> seconds).
BUCKETS: dict[str, int] = {
    "1m": 60,
    "5m": 300,
    "15m": 900,
    "1h": 3600,
    "6h": 21600,
    "1d": 86400,
}
MAX_BUCKETS = 2000  # per series: a window/bucket pair producing more is refused

_SUMS = TOTALS_SQL.strip() + ",\n       SUM(latency_ms)"  # the billing totals + latency
_N_SUMS = len(COUNTERS) + 1


@dataclass(frozen=True, slots=True)
class Window:
    """Requests started in ``[since, until)`` (unix seconds)."""

    since: float
    until: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Aggregate(LedgerTotals):
    """Totals over a group of ledger rows (a key, a model, a time bucket, ...)."""

    latency_ms_total: float
    group: tuple[Any, ...] = ()  # (bucket start?, group value?) in the order requested

    @property
    def unprocessable_rate(self) -> float:
        """Share of requests answered 422 (still invalid after a correction)."""
        return self.unprocessable_422 / self.requests if self.requests else 0.0

    def to_json(self) -> dict[str, Any]:
        """The counters plus the derived tokens and rates (no group fields)."""
        return {
            "requests": self.requests,
            "errors_4xx": self.errors_4xx,
            "unprocessable_422": self.unprocessable_422,
            "errors_5xx": self.errors_5xx,
            "streamed": self.streamed,
            "estimated": self.estimated,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "correction_prompt_tokens": self.correction_prompt_tokens,
            "correction_completion_tokens": self.correction_completion_tokens,
            "first_attempt_tokens": self.first_attempt_tokens,
            "correction_tokens": self.correction_tokens,
            "schema_retries": self.schema_retries,
            "corrected_requests": self.corrected_requests,
            "upstream_calls": self.upstream_calls,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_creation_tokens": self.cache_creation_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "correction_rate": self.correction_rate,
            "unprocessable_rate": self.unprocessable_rate,
            "latency_ms_avg": self.latency_ms_total / self.requests if self.requests else 0.0,
        }


def _aggregate(row: Row, n_group: int, bucketed: bool) -> Aggregate:
    sums = row[n_group:]
    ints = dict(zip(_INT_FIELDS, (int(v or 0) for v in sums[: _N_SUMS - 1]), strict=True))
    group = list(row[:n_group])
    if bucketed:
        group[0] = float(group[0])  # FLOOR gives a double, CAST an int: one type out
    return Aggregate(**ints, latency_ms_total=float(sums[-1] or 0.0), group=tuple(group))


_INT_FIELDS = tuple(Aggregate.__dataclass_fields__)[: _N_SUMS - 1]
_SUM_FIELDS = (*_INT_FIELDS, "latency_ms_total")


def _bucket_expr(db: Database, bucket_s: int) -> str:
    if bucket_s not in BUCKETS.values():
        raise ValueError(f"unsupported bucket width {bucket_s}")
    if db.dialect == "postgresql":
        return f"FLOOR(started_at / {bucket_s}) * {bucket_s}"
    return f"CAST(started_at / {bucket_s} AS INTEGER) * {bucket_s}"


def _where(window: Window, key_id: str | None, model: str | None) -> tuple[str, list[Any]]:
    sql = "started_at >= ? AND started_at < ?"
    params: list[Any] = [window.since, window.until]
    if key_id is not None:
        sql += " AND key_id = ?"
        params.append(key_id)
    if model is not None:
        sql += " AND model = ?"
        params.append(model)
    return sql, params


async def aggregate(
    db: Database,
    window: Window,
    *,
    group_by: GroupColumn | tuple[GroupColumn, ...] | None = None,
    bucket_s: int | None = None,
    key_id: str | None = None,
    model: str | None = None,
) -> list[Aggregate]:
    """Aggregates over ``window`` (optionally one key / one model), grouped by time bucket
    (``bucket_s``, the bucket's start in ``group[0]``) and/or columns (after it, in order).
    Without grouping, exactly one row (all zeros for an empty window)."""
    columns = (group_by,) if isinstance(group_by, str) else group_by or ()
    for column in columns:
        if column not in GROUP_COLUMNS:
            raise ValueError(f"cannot group by {column!r}")
    cols: list[str] = []
    if bucket_s is not None:
        cols.append(_bucket_expr(db, bucket_s))
    cols.extend(columns)
    where, params = _where(window, key_id, model)
    select = ", ".join([*cols, _SUMS])
    sql = f"SELECT {select} FROM usage_records WHERE {where}"
    if cols:
        positions = ", ".join(str(i + 1) for i in range(len(cols)))
        sql += f" GROUP BY {positions} ORDER BY {positions}"
    rows = await db.fetch(sql, params)
    return [_aggregate(r, len(cols), bucket_s is not None) for r in rows]


def _sort_key(group: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    # NULL last on both backends (SQLite sorts it first, PostgreSQL last).
    return tuple((v is None, "" if v is None else v) for v in group)


def fold(aggs: list[Aggregate], positions: tuple[int, ...]) -> list[Aggregate]:
    """Re-group finer aggregates by the group values at ``positions`` (summing the
    counters), sorted by them with NULL last. ``positions=()`` gives the one total."""
    sums: dict[tuple[Any, ...], list[Any]] = {}
    for a in aggs:
        key = tuple(a.group[i] for i in positions)
        values = [getattr(a, f) for f in _SUM_FIELDS]
        acc = sums.get(key)
        if acc is None:
            sums[key] = values
        else:
            for i, v in enumerate(values):
                acc[i] += v
    if not positions and not sums:
        sums[()] = [0] * (len(_SUM_FIELDS) - 1) + [0.0]
    return [
        Aggregate(**dict(zip(_SUM_FIELDS, sums[k], strict=True)), group=k)
        for k in sorted(sums, key=_sort_key)
    ]


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Everything ``GET /admin/usage`` shows, from two scans of the window."""

    totals: Aggregate
    by: dict[GroupColumn, list[Aggregate]]  # group == (value,)
    series_total: list[Aggregate]  # group == (bucket start,)
    series_by_model: list[Aggregate]  # group == (bucket start, model)
    series_by_key: list[Aggregate]  # group == (bucket start, key_id)


async def usage_report(
    db: Database,
    window: Window,
    *,
    bucket_s: int,
    key_id: str | None = None,
    model: str | None = None,
) -> UsageReport:
    """Totals, one breakdown per ``GROUP_COLUMNS`` column, and time series in total, per
    model and per key. The totals and breakdowns are folded here from one query grouped
    by every column (few groups), rather than a scan each; the series are three queries
    (a fold of bucket x model x key would mean far more rows). On PostgreSQL the queries
    run concurrently on the pool."""

    def agg(group_by: Any, bucket: int | None = None) -> Coroutine[Any, Any, list[Aggregate]]:
        return aggregate(db, window, group_by=group_by, bucket_s=bucket, key_id=key_id, model=model)

    combos, total, per_model, per_key = await asyncio.gather(
        agg(GROUP_COLUMNS), agg(None, bucket_s), agg("model", bucket_s), agg("key_id", bucket_s)
    )
    return UsageReport(
        totals=fold(combos, ())[0],
        by={c: fold(combos, (i,)) for i, c in enumerate(GROUP_COLUMNS)},
        series_total=total,
        series_by_model=fold(per_model, (0, 1)),  # NULL-last order, like the breakdowns
        series_by_key=fold(per_key, (0, 1)),
    )


# -- recent requests -------------------------------------------------------------------

REQUEST_COLUMNS: tuple[str, ...] = (
    "request_id",
    "key_id",
    "model",
    "endpoint",
    "status",
    "error_code",
    "streamed",
    "prompt_tokens",
    "completion_tokens",
    "correction_prompt_tokens",
    "correction_completion_tokens",
    "schema_retries",
    "upstream_calls",
    "latency_ms",
    "started_at",
    "finished_at",
    "estimated",
    "cache_read_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
)
MAX_REQUESTS = 500


@dataclass(frozen=True, slots=True)
class RequestFilter:
    """Filters for the recent-requests list; ``None`` means any. ``error_code=""`` selects
    rows without an error code. ``before`` pages back (``started_at < before``)."""

    key_id: str | None = None
    model: str | None = None
    error_code: str | None = None
    status: int | None = None
    before: float | None = None


def _request_json(row: Row) -> dict[str, Any]:
    out = dict(zip(REQUEST_COLUMNS, row, strict=True))
    for name in ("streamed", "estimated"):
        out[name] = bool(out[name])
    for name in ("latency_ms", "started_at", "finished_at"):
        out[name] = float(out[name])
    return out


async def recent_requests(
    db: Database, where: RequestFilter, *, limit: int = 100
) -> list[dict[str, Any]]:
    """The newest ledger rows matching ``where`` (newest first), as JSON-ready dicts with
    the ``REQUEST_COLUMNS`` fields."""
    clauses: list[str] = []
    params: list[Any] = []
    if where.key_id is not None:
        clauses.append("key_id = ?")
        params.append(where.key_id)
    if where.model is not None:
        clauses.append("model = ?")
        params.append(where.model)
    if where.error_code == "":
        clauses.append("error_code IS NULL")
    elif where.error_code is not None:
        clauses.append("error_code = ?")
        params.append(where.error_code)
    if where.status is not None:
        clauses.append("status = ?")
        params.append(where.status)
    if where.before is not None:
        clauses.append("started_at < ?")
        params.append(where.before)
    sql = f"SELECT {', '.join(REQUEST_COLUMNS)} FROM usage_records"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY started_at DESC, request_id DESC LIMIT ?"
    params.append(max(1, min(limit, MAX_REQUESTS)))
    return [_request_json(r) for r in await db.fetch(sql, params)]
