"""The series the request path updates: names, HELP texts and labels, in one place for
the metrics that keep them (``direct``).

Dashboards are built on these names and texts: change them only with a note in
``CHANGELOG.md``. The order here is the order of ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    help: str
    labels: tuple[str, ...] = ()


REQUESTS = Series(
    "syntic_requests_total",
    "HTTP requests by route template, status and error code ('' on success).",
    ("route", "status", "code"),
)
UPSTREAM_LATENCY = Series(
    "syntic_upstream_latency_seconds",
    "Duration of one upstream model call (streams: until the last event).",
    ("model",),
)
UPSTREAM_CALLS = Series(
    "syntic_upstream_calls_total",
    "Upstream model calls (attempts): kind=first, correction (schema "
    "correction calls) or retry (attempts that failed safely and were retried).",
    ("model", "kind"),
)
UPSTREAM_RETRIES = Series(
    "syntic_upstream_retries_total",
    "Upstream attempts retried after a safe failure; reason=connect or the "
    "upstream status (429, 502, 503, 529).",
    ("model", "reason"),
)
INFLIGHT_REFUSED = Series(
    "syntic_inflight_refused_total",
    "Requests refused with 503 overloaded: max_inflight already in flight.",
)
SCHEMA_CORRECTIONS = Series(
    "syntic_schema_corrections_total",
    "Correction calls made because strict tool arguments or JSON output did not match the schema.",
)
TOOL_ARGUMENTS_INVALID = Series(
    "syntic_tool_arguments_invalid_total",
    "422 responses: output still invalid after one correction.",
    ("code",),
)
RATELIMIT_DECISIONS = Series(
    "syntic_ratelimit_decisions_total",
    "Rate limit checks by decision (allowed|limited).",
    ("decision",),
)

# Seconds; covers a fast local model (ms) to a slow hosted one (a minute).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class RequestPathMetrics(Protocol):
    """The updates the request path makes (``direct.Direct``)."""

    def count_request(self, route: str, status: int, code: str | None) -> None: ...
    def observe_upstream(self, model: str, seconds: float) -> None: ...
    def count_upstream_calls(
        self, model: str, first: int, corrections: int, retried: Mapping[str, int] | None
    ) -> None: ...
    def count_rate_decision(self, allowed: bool) -> None: ...
    def count_inflight_refused(self) -> None: ...
