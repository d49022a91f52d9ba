"""Canonical streaming events, produced by upstream adapters and consumed by dialects."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.canonical.model import FinishReason, Usage


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A new tool call at position ``index`` of the assistant turn."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of the arguments JSON text of the call at ``index``."""

    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class Finish:
    reason: FinishReason
    stop_sequence: str | None = None  # as ``ChatResponse.stop_sequence``


@dataclass(frozen=True, slots=True)
class UsageReport:
    usage: Usage


StreamEvent = TextDelta | ToolCallStart | ToolCallDelta | Finish | UsageReport
