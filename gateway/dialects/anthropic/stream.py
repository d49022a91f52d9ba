"""Canonical stream events -> Anthropic Messages SSE bytes.

The event sequence follows the Messages streaming format::

    message_start
      content_block_start (thinking | redacted_thinking | text | tool_use, empty input)
      content_block_delta (thinking_delta | signature_delta | text_delta |
                           input_json_delta)*
      content_block_stop
      ...
    message_delta (stop_reason, usage: every count, cumulative, incl. schema_retries)
    message_stop

Blocks are numbered in the order they are emitted, which is what clients index by.
Thinking blocks and server tools' blocks (``server_tool_use``, ``web_search_tool_result``,
...) come only from an Anthropic upstream (``WireEvent``), passed through as sent (a
signature, an ``input_json_delta``) and renumbered; so are a ``pause_turn`` stop reason
the code-execution ``container`` and a refusal's ``stop_details``; a text block that
cites (``citations`` and ``citations_delta``) stays a block of its own.
The encoder only sees events the hold-back released, so a strict ``tool_use`` block is
opened only once its input validated.

Example::

    enc = MessageStreamEncoder(model="amara-s1.2", message_id="msg_1")
    out = enc.start()
    for event in events:
        out += enc.encode(event)
    out += enc.finish(schema_retries=0)
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.canonical import (
    Finish,
    FinishReason,
    RefusalDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
    WireEvent,
)
from gateway.dialects.anthropic.encode import (
    encode_error,
    encode_usage,
    kept_stop_reason,
    stop_reason,
)
from gateway.enforcement.holdback import Choice, FinalUsage, HeldEvent
from gateway.errors import GatewayError

__all__ = ["MessageStreamEncoder", "error_event", "ping_event", "sse"]


# The passed-through events of a text block that cites.
_CITED = frozenset({"cited_block", "citation", "cited_block_stop"})
# Members of the upstream's message a ``message_delta`` carries as sent.
_DELTA_MEMBERS = ("container", "stop_details")


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event with Anthropic's ``event:`` name and a JSON ``data:`` line."""
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def ping_event() -> bytes:
    return sse("ping", {"type": "ping"})


def error_event(error: GatewayError, request_id: str) -> bytes:
    """The terminal ``error`` event: the same envelope as a non-streaming error."""
    return sse("error", encode_error(error, request_id))


class MessageStreamEncoder:
    """Stateful encoder for one streamed message. Not thread-safe; one per response."""

    __slots__ = (
        "_current",
        "_current_is_text",
        "_fields",
        "_finish",
        "_model",
        "_next_index",
        "_passing",
        "_refused",
        "_retries",
        "_stop_sequence",
        "_tool_blocks",
        "_usage",
        "message_id",
    )

    def __init__(self, *, model: str, message_id: str) -> None:
        self._model = model
        self.message_id = message_id
        self._next_index = 0
        self._current: int | None = None  # the open block's index
        self._current_is_text = False
        self._tool_blocks: dict[int, int] = {}  # canonical tool index -> block index
        self._passing: dict[int, int] = {}  # the upstream's passed-through block -> ours
        self._fields: dict[str, Any] = {}  # the upstream's kept stop_reason, container
        self._finish: FinishReason = "stop"
        self._usage = Usage()
        self._retries = 0
        self._stop_sequence: str | None = None
        self._refused = False

    def start(self, input_tokens: int = 0) -> bytes:
        """``message_start`` with an empty assistant message. Its usage is not known yet
        (an upstream reports it at the end, after the hold-back): ``message_delta``
        carries every count, cumulative, as the Messages API allows."""
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 0,
            },
        }
        return sse("message_start", {"type": "message_start", "message": message})

    def _close_current(self) -> bytes:
        if self._current is None:
            return b""
        index, self._current = self._current, None
        self._current_is_text = False
        return sse("content_block_stop", {"type": "content_block_stop", "index": index})

    def _open(self, block: dict[str, Any], *, text: bool) -> tuple[int, bytes]:
        out = self._close_current()
        index = self._next_index
        self._next_index += 1
        self._current = index
        self._current_is_text = text
        start = {"type": "content_block_start", "index": index, "content_block": block}
        return index, out + sse("content_block_start", start)

    def encode_batch(self, batch: list[HeldEvent]) -> bytes:
        """The bytes for one hold-back batch (one socket write)."""
        # ``Choice`` markers come only with ``n > 1``, which Messages has not.
        return b"".join(self.encode(e) for e in batch if not isinstance(e, Choice))

    def encode(self, event: StreamEvent | FinalUsage) -> bytes:
        """The SSE bytes for one canonical event (possibly empty)."""
        if isinstance(event, TextDelta | RefusalDelta):
            # A refusal's words are text here; ``stop_reason: "refusal"`` says what they are.
            if isinstance(event, RefusalDelta):
                self._refused = True
            if not event.text:
                return b""
            out = b""
            if not self._current_is_text:
                _, out = self._open({"type": "text", "text": ""}, text=True)
            delta = {"type": "text_delta", "text": event.text}
            return out + sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": self._current, "delta": delta},
            )
        if isinstance(event, ToolCallStart):
            block = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
            if event.members is not None and event.members.wire == "anthropic":
                block.update(event.members.fields)  # caller, toolset_name: as sent
            index, out = self._open(block, text=False)
            self._tool_blocks[event.index] = index
            return out
        if isinstance(event, ToolCallDelta):
            if not event.arguments:
                return b""
            index = self._tool_blocks[event.index]
            delta = {"type": "input_json_delta", "partial_json": event.arguments}
            return sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        if isinstance(event, Finish):
            self._finish = event.reason
            self._stop_sequence = event.stop_sequence
            self._refused = self._refused or event.refused
            return b""
        if isinstance(event, UsageReport):
            # Each upstream call (the correction included) reports its own usage; the
            # message's usage is their sum.
            self._usage = self._usage + event.usage
            return b""
        if isinstance(event, FinalUsage):
            # The hold-back's total over every upstream call replaces any partial sum.
            self._usage = event.usage
            self._retries = event.schema_retries
            return b""
        if isinstance(event, WireEvent):
            if event.wire != "anthropic":
                return b""
            if event.kind == "fields":
                self._fields = event.data
                return b""
            if event.kind in _CITED:
                return self._cited(event)
            return self._passed(event)
        raise TypeError(f"unknown stream event {event!r}")

    def _cited(self, event: WireEvent) -> bytes:
        """A text block that cites: its own block (the text before and after it is not
        merged in), each citation a ``citations_delta`` before its text, as sent."""
        kind = event.kind
        if kind == "cited_block_stop":
            return self._close_current() if self._current_is_text else b""
        out = b""
        if kind == "cited_block" or not self._current_is_text:
            _, out = self._open({"type": "text", "text": "", "citations": []}, text=True)
        cited = event.data["citations"] if kind == "cited_block" else [event.data["citation"]]
        for citation in cited:
            delta = {"type": "citations_delta", "citation": citation}
            out += sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": self._current, "delta": delta},
            )
        return out

    def _passed(self, event: WireEvent) -> bytes:
        """A passed-through block's start, delta or stop (thinking, a server tool's use
        and result), under this stream's block numbering."""
        data = event.data
        kind = data.get("type")
        if kind == "content_block_start":
            index, out = self._open(dict(data["content_block"]), text=False)
            self._passing[int(data["index"])] = index
            return out
        index = self._passing.get(int(data.get("index", -1)), -1)
        if index < 0:
            return b""
        if kind == "content_block_stop":
            if self._current != index:
                return b""
            return self._close_current()
        return sse(str(kind), {**data, "index": index})

    def finish(
        self, *, schema_retries: int | None = None, stop_sequence: str | None = None
    ) -> bytes:
        """Close the open block, then ``message_delta`` (stop reason, final usage) and
        ``message_stop``. ``schema_retries`` defaults to the ``FinalUsage`` figure."""
        out = self._close_current()
        if schema_retries is None:
            schema_retries = self._retries
        if stop_sequence is None:
            stop_sequence = self._stop_sequence
        said = stop_reason(
            self._finish, stop_sequence, tool_use=bool(self._tool_blocks), refused=self._refused
        )
        ended: dict[str, Any] = {
            "stop_reason": kept_stop_reason(said, self._finish, self._fields),
            "stop_sequence": stop_sequence,
        }
        kept = self._fields
        ended.update((k, kept[k]) for k in _DELTA_MEMBERS if kept.get(k) is not None)
        delta = {
            "type": "message_delta",
            "delta": ended,
            "usage": encode_usage(self._usage, schema_retries),
        }
        return out + sse("message_delta", delta) + sse("message_stop", {"type": "message_stop"})
