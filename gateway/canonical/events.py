"""Canonical streaming events, produced by upstream adapters and consumed by dialects."""

from __future__ import annotations

from gateway.canonical.model import FinishReason, Usage
from gateway.canonical.record import record


@record
class TextDelta:
    text: str


@record
class ToolCallStart:
    """A new tool call at position ``index`` of the assistant turn."""

    index: int
    id: str
    name: str


@record
class ToolCallDelta:
    """A fragment of the arguments JSON text of the call at ``index``."""

    index: int
    arguments: str


@record
class Finish:
    reason: FinishReason
    stop_sequence: str | None = None  # as ``ChatResponse.stop_sequence``


@record
class UsageReport:
    usage: Usage


StreamEvent = TextDelta | ToolCallStart | ToolCallDelta | Finish | UsageReport
