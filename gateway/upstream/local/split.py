"""Incremental split of generated text into canonical stream events.

Plain text streams as ``TextDelta`` as it comes, holding back only what could still turn
into ``<tool_call>`` (and trailing whitespace, so text matches the non-streaming result).
A tagged call is buffered until ``</tool_call>`` (or the end) and then emitted as
``ToolCallStart`` + one ``ToolCallDelta`` with the arguments text verbatim: in strict mode
the gateway holds arguments back until validated anyway. An answer that *starts* with
JSON or a code fence while tools are offered may be a bare call (small models write those),
so it is buffered to the end and parsed whole.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection

from gateway.canonical import StreamEvent, TextDelta, ToolCallDelta, ToolCallStart
from gateway.upstream.local.parse import (
    CLOSE_TAG,
    OPEN_TAG,
    ParsedCall,
    parse_call_body,
    parse_output,
)


def new_call_id() -> str:
    return f"call_{secrets.token_hex(12)}"


def _partial_tag_suffix(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of OPEN_TAG."""
    for n in range(min(len(OPEN_TAG) - 1, len(text)), 0, -1):
        if text.endswith(OPEN_TAG[:n]):
            return n
    return 0


class EventSplitter:
    """Feed text pieces in order with ``feed``; call ``finish`` once at the end."""

    def __init__(self, tool_names: Collection[str]) -> None:
        self._tools = frozenset(tool_names)
        self._mode = "start"  # start | text | call | whole
        self._buf = ""
        self._calls = 0
        self._sent_text = False

    @property
    def call_count(self) -> int:
        return self._calls

    def feed(self, piece: str) -> list[StreamEvent]:
        self._buf += piece
        events: list[StreamEvent] = []
        while True:
            before = (self._mode, len(self._buf))
            events.extend(self._step())
            if (self._mode, len(self._buf)) == before:
                return events

    def _step(self) -> list[StreamEvent]:
        if self._mode == "start":
            stripped = self._buf.lstrip()
            if not stripped:
                return []
            whole = bool(self._tools) and stripped[0] in "{[`"
            self._mode = "whole" if whole else "text"
            self._buf = stripped
            return []
        if self._mode == "text":
            return self._text_step()
        if self._mode == "call":
            close_at = self._buf.find(CLOSE_TAG)
            if close_at < 0:
                return []
            body, self._buf = self._buf[:close_at], self._buf[close_at + len(CLOSE_TAG) :]
            self._mode = "text"
            return self._call_events(body)
        return []  # whole: everything waits for finish()

    def _text_step(self) -> list[StreamEvent]:
        open_at = self._buf.find(OPEN_TAG)
        if open_at >= 0:
            text, self._buf = self._buf[:open_at], self._buf[open_at + len(OPEN_TAG) :]
            self._mode = "call"
            return self._text(text.rstrip())
        keep = _partial_tag_suffix(self._buf)
        ready = self._buf[: len(self._buf) - keep] if keep else self._buf
        stripped = ready.rstrip()
        # Trailing whitespace waits until something follows it.
        self._buf = self._buf[len(stripped) :]
        return self._text(stripped)

    def _text(self, text: str) -> list[StreamEvent]:
        if not self._sent_text:
            text = text.lstrip()
        if not text:
            return []
        self._sent_text = True
        return [TextDelta(text)]

    def _call_events(self, body: str) -> list[StreamEvent]:
        call = parse_call_body(body)
        if call is None:
            return self._text(body)
        return self._emit(call)

    def _emit(self, call: ParsedCall) -> list[StreamEvent]:
        index = self._calls
        self._calls += 1
        return [
            ToolCallStart(index=index, id=new_call_id(), name=call.name),
            ToolCallDelta(index=index, arguments=call.raw_arguments),
        ]

    def finish(self) -> list[StreamEvent]:
        """Flush what was held back (an unterminated call is parsed as far as it goes)."""
        buf, self._buf = self._buf, ""
        if self._mode == "call":
            return self._call_events(buf)
        if self._mode == "whole":
            turn = parse_output(buf, self._tools)
            events: list[StreamEvent] = self._text(turn.content or "")
            for call in turn.calls:
                events.extend(self._emit(call))
            return events
        return self._text(buf.rstrip()) if self._mode == "text" else []
