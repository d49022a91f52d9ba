"""Per-request bookkeeping shared by the middleware, the dialects and the service.

One ``RequestContext`` is created by the outer middleware for every HTTP request. Layers
fill it in as the request goes (principal, model, tallies); the middleware turns it into
response headers (``x-request-id``, ``x-syntic-schema-retries``) and one ``UsageRecord``
for the ledger, whatever the outcome.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

from gateway.bounds import name_list, redact
from gateway.canonical import Usage
from gateway.keys.base import Principal
from gateway.ratelimit.base import RateDecision
from gateway.usage.base import Ledger, UsageRecord

# The totals of a request before any call: one shared immutable value, not two per request.
_NO_USAGE = Usage()


class Tally:
    """Running totals over every upstream call of one request (first attempt + corrections).

    Mutable by design: the enforcement loop adds to it as calls complete, possibly from
    concurrent corrections (all on one event loop, so no locking is needed).
    """

    __slots__ = (
        "correction_usage",
        "first_usage",
        "retried_attempts",
        "retries",
        "started",
        "tool_errors",
        "upstream_calls",
    )

    def __init__(self) -> None:
        self.first_usage = _NO_USAGE
        self.correction_usage = _NO_USAGE
        self.retries = 0
        self.upstream_calls = 0  # calls that finished (answered, failed or retried)
        self.started = 0  # calls announced just before they were sent
        # (reason, count) of attempts that failed safely and were retried; None: none yet
        self.retried_attempts: dict[str, int] | None = None
        # ``on_invalid = "tool_error"``: ("dropped" | "missing", tool) per call the answer
        # explains instead of carrying (``x-syntic-on-invalid``); None: none
        self.tool_errors: list[tuple[str, str]] | None = None

    def add_first(self, usage: Usage) -> None:
        # Nothing before it (nearly always): the sum is ``usage`` itself.
        self.first_usage = usage if self.first_usage is _NO_USAGE else self.first_usage + usage
        self.upstream_calls += 1

    def add_correction(self, usage: Usage) -> None:
        self.correction_usage = self.correction_usage + usage
        self.retries += 1
        self.upstream_calls += 1

    def add_retried_attempt(self, reason: str) -> None:
        """An upstream attempt that failed safely and is being retried
        (``gateway.upstream.retry``): it reached, or tried to reach, the upstream, so it
        counts in ``upstream_calls``; the final attempt is counted by the caller."""
        self.upstream_calls += 1
        if self.retried_attempts is None:
            self.retried_attempts = {}
        self.retried_attempts[reason] = self.retried_attempts.get(reason, 0) + 1

    def tool_error(self, kind: str, tool: str) -> None:
        """A call dropped (``dropped``), or required and missing (``missing``; ``*``: any)."""
        if self.tool_errors is None:
            self.tool_errors = []
        self.tool_errors.append((kind, tool))

    def call_started(self) -> None:
        """An upstream call is about to be sent (``RequestContext.upstream_call_starting``)."""
        self.started += 1

    @property
    def calls(self) -> int:
        """Every upstream call made: each announced one, a call cancelled mid-flight
        included (the other choices of an ``n > 1`` request when one fails); for a caller
        that announces none, the ones that finished."""
        finished, started = self.upstream_calls, self.started
        return started if started > finished else finished  # max() parses keywords: dearer

    @property
    def total(self) -> Usage:
        if self.correction_usage is _NO_USAGE:  # no correction: the sum is the first attempt's
            return self.first_usage
        return self.first_usage + self.correction_usage


class SlotGate(Protocol):
    """The in-flight gate whose slots a request holds (``gateway.ratelimit.inflight``)."""

    limit: int

    def limit_for(self, principal: Principal | None) -> int:
        """The slots one key's requests may hold at once (0: unbounded)."""
        ...

    def hold(self, ctx: RequestContext, n: int, principal: Principal | None = None) -> None:
        """Hold ``n`` slots (one per concurrent upstream call), ``n`` of them the key's;
        raise 429 past the key's bound, 503 past the process's."""
        ...

    def hold_model(
        self,
        ctx: RequestContext,
        model: str,
        limit: int,
        n: int,
        principal: Principal | None = None,
    ) -> None:
        """Hold ``n`` of ``model``'s ``limit`` upstream slots (0: no bound of its own);
        raise 429 past the key's share of them, 503 when the model's are taken."""
        ...


@dataclass(slots=True)
class RequestContext:
    """Everything known about one request; filled in by each layer as it goes."""

    request_id: str
    endpoint: str
    started_at: float
    started_mono: float
    principal: Principal | None = None
    model: str | None = None
    streamed: bool = False
    enforced: bool = False  # strict tools or strict response_format: send retries header
    # Tools the projection left non-strict, comma-separated and percent-encoded: the
    # ``x-syntic-strict-refused`` header and the ledger's column.
    strict_refused: str | None = None
    status: int = 0
    error_code: str | None = None
    estimated: bool = False
    tally: Tally | None = None
    raw_headers: list[tuple[bytes, bytes]] | None = None
    # The rate limiter's decision for this request (None: no limits checked): the HTTP
    # layer renders it as the ``x-ratelimit-*`` headers of its response, a 429's included.
    rate: RateDecision | None = None
    # What the client's request or its answer carried that it did not get: one
    # ``x-syntic-dropped`` header on the response.
    dropped: list[str] | None = None
    # Told before each upstream call, so a process killed mid-call still bills it.
    journal: Ledger | None = None
    prompt_estimate: int = 0  # the rate limiter's token estimate for one call's prompt
    # The request's overall deadline (``time.monotonic()`` clock), set by the outer
    # middleware; None: no deadline.
    deadline: float | None = None
    # The in-flight gate the request entered and the slots it holds there (None: no gate).
    gate: SlotGate | None = None
    slots: int = 0
    key_slots: int = 0  # of them, counted against the principal's own bound
    model_slots: int = 0  # of them, counted against the model's upstream slots
    slot_model: str | None = None  # the model those are counted for
    # What the rate limiter charged before the body was parsed (requests, tokens): the
    # admission after decoding charges only the rest.
    charged: tuple[int, int] | None = None

    @classmethod
    def start(cls, request_id: str, endpoint: str) -> RequestContext:
        """A new context for a request that starts now."""
        ctx = cls(request_id, endpoint, time.time(), time.perf_counter())
        ctx.tally = Tally()  # a store after: a keyword costs the generated __init__ more
        return ctx

    def remaining_s(self) -> float | None:
        """Seconds left before this request's deadline (None: no deadline)."""
        deadline = self.deadline
        if deadline is None:
            return None
        return deadline - time.monotonic()

    def add_raw_headers(self, pairs: list[tuple[bytes, bytes]]) -> None:
        """Already encoded headers (lower-case names) for every response to this request."""
        if self.raw_headers is None:
            self.raw_headers = pairs
        else:
            self.raw_headers.extend(pairs)

    def response_headers(self) -> list[tuple[bytes, bytes]]:
        """Headers every response to this request carries (error responses included)."""
        out = [(b"x-request-id", self.request_id.encode())]
        if self.enforced and self.tally is not None:
            out.append((b"x-syntic-schema-retries", str(self.tally.retries).encode()))
        if self.strict_refused is not None:
            out.append((b"x-syntic-strict-refused", self.strict_refused.encode()))
        if self.raw_headers:
            out.extend(self.raw_headers)
        if self.tally is not None and self.tally.tool_errors:
            out.append((b"x-syntic-on-invalid", _tool_errors_header(self.tally.tool_errors)))
        if self.dropped:
            out.append((b"x-syntic-dropped", name_list(self.dropped).encode()))
        return out

    def drop(self, names: Iterable[str]) -> None:
        """Name what the client does not get (``x-syntic-dropped``), each once."""
        if self.dropped is None:
            self.dropped = []
        for name in names:
            if name not in self.dropped:
                self.dropped.append(name)

    def upstream_call_starting(self) -> None:
        """Called just before each upstream call (attempts and corrections included): it
        is counted now, so a call cancelled before it finishes is still billed."""
        tally = self.tally
        if tally is None:
            tally = self.tally = Tally()
        tally.call_started()
        if self.journal is not None:
            self.journal.started(self.interrupted_record())

    def interrupted_record(self) -> UsageRecord:
        """The row to bill if the process dies during the upstream call just announced
        (``upstream_call_starting``): the tokens known so far plus the estimated prompt of
        that call, ``estimated``."""
        tally = self.tally or Tally()
        first = tally.first_usage
        fix = tally.correction_usage
        # The estimate goes to the correction columns once a first answer is in (none yet
        # for the first call: no need to add its tokens up).
        correcting = bool(tally.retries or (first is not _NO_USAGE and first.total_tokens))
        estimate = self.prompt_estimate
        # This call and every one before it: max(tally.calls, upstream_calls + 1).
        calls = tally.upstream_calls + 1
        if tally.started > calls:
            calls = tally.started
        return UsageRecord(
            self.request_id,
            self.principal.key_id if self.principal else None,
            None if self.model is None else redact(self.model),  # masked, as in the log
            self.endpoint,
            502,
            "gateway_interrupted",
            self.streamed,
            first.prompt_tokens + (0 if correcting else estimate),
            first.completion_tokens,
            fix.prompt_tokens + (estimate if correcting else 0),
            fix.completion_tokens,
            tally.retries,
            calls,
            (time.perf_counter() - self.started_mono) * 1000.0,
            self.started_at,
            time.time(),
            True,
            None if self.strict_refused is None else redact(self.strict_refused),
            first.cache_read_tokens + fix.cache_read_tokens,
            first.cache_creation_tokens + fix.cache_creation_tokens,
            first.reasoning_tokens + fix.reasoning_tokens,
        )

    def usage_record(self) -> UsageRecord:
        """The request's final row (positional, as ``interrupted_record``: once per
        request); ``estimated`` when any call's usage was."""
        tally = self.tally or Tally()
        first = tally.first_usage
        fix = tally.correction_usage
        return UsageRecord(
            self.request_id,
            self.principal.key_id if self.principal else None,
            None if self.model is None else redact(self.model),  # masked, as in the log
            self.endpoint,
            self.status,
            self.error_code,
            self.streamed,
            first.prompt_tokens,
            first.completion_tokens,
            fix.prompt_tokens,
            fix.completion_tokens,
            tally.retries,
            tally.calls,
            (time.perf_counter() - self.started_mono) * 1000.0,
            self.started_at,
            time.time(),
            self.estimated or first.estimated or fix.estimated,
            None if self.strict_refused is None else redact(self.strict_refused),
            first.cache_read_tokens + fix.cache_read_tokens,
            first.cache_creation_tokens + fix.cache_creation_tokens,
            first.reasoning_tokens + fix.reasoning_tokens,
        )


def _tool_errors_header(errors: list[tuple[str, str]]) -> bytes:
    """``tool_error; dropped=a,b; missing=c``: names percent-encoded (a dropped call's name
    is the upstream's), each list capped as ``x-syntic-dropped`` is."""
    parts = ["tool_error"]
    for kind in ("dropped", "missing"):
        names = [quote(tool, safe="-_.*") for k, tool in errors if k == kind]
        if names:
            parts.append(f"{kind}={name_list(names)}")
    return "; ".join(parts).encode()
