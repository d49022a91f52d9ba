"""What the request path hands to the ledger."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


# Not frozen: a frozen dataclass sets each of its 21 fields through object.__setattr__ in
# __init__, and one record is built per request. Nothing mutates a record. Not slotted:
# orjson writes a dataclass that has an instance __dict__ straight from that dict, a
# slotted one field by field (about twice the cost; two spool lines per request).
@dataclass
class UsageRecord:
    request_id: str
    key_id: str | None
    model: str | None
    endpoint: str
    status: int
    error_code: str | None
    streamed: bool
    prompt_tokens: int
    completion_tokens: int
    correction_prompt_tokens: int
    correction_completion_tokens: int
    schema_retries: int
    upstream_calls: int
    latency_ms: float
    started_at: float  # unix seconds
    finished_at: float
    estimated: bool = False  # tokens estimated (no usage from the upstream, a disconnect)
    strict_refused: str | None = None  # tools the projection left non-strict, comma-separated
    # Parts of the prompt and completion columns (over every call of the request): prompt
    # tokens read from / written to the provider's cache, completion tokens of reasoning.
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0


class Ledger(Protocol):
    # False while too many rows are in memory only (neither the spool nor the database
    # took them): new requests are then refused rather than answered without a row.
    accepting: bool

    def record(self, record: UsageRecord) -> None:
        """The request's final row: spooled locally and enqueued; never blocks, never
        waits for the database."""
        ...

    def started(self, record: UsageRecord) -> None:
        """An upstream call for this request is about to start: ``record`` is what to bill
        if the process dies before ``record()`` is called for the same request id."""
        ...
