"""Ledger aggregates for billing (``syntic usage``) and the admin API."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from gateway.storage.base import Database

_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(value: str, *, now: float | None = None) -> float:
    """Unix seconds for ``-90s``/``-30m``/``-1h``/``-7d`` (relative to now) or an ISO 8601
    date/time (naive means UTC). Raises ``ValueError`` otherwise."""
    m = _RELATIVE.match(value.strip())
    if m:
        return (time.time() if now is None else now) - float(m.group(1)) * _UNITS[m.group(2)]
    text = value.strip().replace("Z", "+00:00")
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTotals:
    """The billing counters over a set of ledger rows, in ``TOTALS_SQL``'s order (shared
    by ``UsageSummary``, ``Totals`` and ``gateway.admin.queries.Aggregate``)."""

    requests: int
    errors_4xx: int
    unprocessable_422: int
    errors_5xx: int
    streamed: int
    estimated: int
    prompt_tokens: int
    completion_tokens: int
    correction_prompt_tokens: int
    correction_completion_tokens: int
    schema_retries: int
    corrected_requests: int
    upstream_calls: int
    # Parts of the prompt (first attempts and corrections) and completion sums above.
    cache_read_tokens: int
    cache_creation_tokens: int
    reasoning_tokens: int

    @property
    def first_attempt_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def correction_tokens(self) -> int:
        return self.correction_prompt_tokens + self.correction_completion_tokens

    @property
    def correction_rate(self) -> float:
        """Share of requests that needed at least one schema correction."""
        return self.corrected_requests / self.requests if self.requests else 0.0


COUNTERS = tuple(f.name for f in fields(LedgerTotals))


def counters(values: Sequence[Any]) -> dict[str, int]:
    """``TOTALS_SQL``'s columns (NULL sums as 0) as ``LedgerTotals`` keyword arguments."""
    return dict(zip(COUNTERS, (int(v or 0) for v in values), strict=True))


@dataclass(frozen=True, slots=True)
class UsageSummary(LedgerTotals):
    """Totals for one (key, model) pair over the window."""

    key_id: str | None
    model: str | None


# The ledger totals, in the field order of ``UsageSummary`` / ``Totals`` (after the group
# columns); ``gateway.admin.queries`` appends its latency sum to the same list.
TOTALS_SQL = """
       COUNT(*),
       SUM(CASE WHEN status >= 400 AND status < 500 THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 422 THEN 1 ELSE 0 END),
       SUM(CASE WHEN status >= 500 THEN 1 ELSE 0 END),
       SUM(CASE WHEN streamed THEN 1 ELSE 0 END),
       SUM(CASE WHEN estimated THEN 1 ELSE 0 END),
       SUM(prompt_tokens), SUM(completion_tokens),
       SUM(correction_prompt_tokens), SUM(correction_completion_tokens),
       SUM(schema_retries),
       SUM(CASE WHEN schema_retries > 0 THEN 1 ELSE 0 END),
       SUM(upstream_calls),
       SUM(cache_read_tokens), SUM(cache_creation_tokens), SUM(reasoning_tokens)"""

_SUMMARY_SQL = (
    """
SELECT key_id, model,"""
    + TOTALS_SQL
    + """
FROM usage_records
WHERE started_at >= ? AND started_at < ?{key_filter}
GROUP BY key_id, model
ORDER BY key_id, model
"""
)


async def summarize(
    db: Database,
    *,
    key_id: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[UsageSummary]:
    """One summary per (key, model) with requests started in ``[since, until)``."""
    params: list[object] = [0.0 if since is None else since, until or time.time() + 1e9]
    key_filter = ""
    if key_id is not None:
        key_filter = " AND key_id = ?"
        params.append(key_id)
    rows = await db.fetch(_SUMMARY_SQL.format(key_filter=key_filter), params)
    return [
        UsageSummary(
            str(r[0]) if r[0] is not None else None,
            str(r[1]) if r[1] is not None else None,
            **counters(r[2:]),
        )
        for r in rows
    ]
