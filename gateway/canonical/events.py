"""Canonical streaming events, produced by upstream adapters and consumed by dialects."""

from __future__ import annotations

from typing import Any

from gateway.canonical.model import (
    AnswerWire,
    Citation,
    FinishReason,
    Members,
    Reasoning,
    TokenLogprob,
    Usage,
)
from gateway.canonical.record import record


@record
class TextDelta:
    text: str
    logprobs: tuple[TokenLogprob, ...] | None = None  # the fragment's tokens, when asked


@record
class RefusalDelta:
    """A fragment of the model's refusal (chat ``delta.refusal``, Responses
    ``response.refusal.delta``)."""

    text: str
    logprobs: tuple[TokenLogprob, ...] | None = None


@record
class WireEvent:
    """An upstream stream event the gateway does not interpret (thinking blocks, reasoning
    items, their summaries, hosted and server tools' items and blocks, custom tool calls),
    as the upstream's ``wire`` sent it: a dialect of the same wire re-emits it in place
    (renumbering what it numbers itself), any other drops it."""

    wire: AnswerWire
    kind: str
    data: dict[str, Any]
    # On the event that ends a reasoning block or item: the whole of it, so a correction
    # can send the turn back with its reasoning.
    reasoning: Reasoning | None = None
    # On the event that starts a call the client runs (``WireItem.client_call``).
    client_call: bool = False
    # On the event that completes a cited span: its citations, placed in the answer's
    # text, for a client of another wire that can say them (a web citation).
    citations: tuple[Citation, ...] = ()


@record
class ToolCallStart:
    """A new tool call at position ``index`` of the assistant turn (``namespace`` and
    ``members``: as ``ToolCall``'s)."""

    index: int
    id: str
    name: str
    namespace: str | None = None
    members: Members | None = None


@record
class ToolCallDelta:
    """A fragment of the arguments JSON text of the call at ``index``."""

    index: int
    arguments: str


@record
class Finish:
    reason: FinishReason
    stop_sequence: str | None = None  # as ``ChatResponse.stop_sequence``
    # The upstream ended the turn as a refusal (Anthropic ``stop_reason: "refusal"``, or
    # refusal deltas were sent).
    refused: bool = False


@record
class UsageReport:
    usage: Usage


StreamEvent = (
    TextDelta | RefusalDelta | ToolCallStart | ToolCallDelta | Finish | UsageReport | WireEvent
)
