"""Streaming split of generated text into canonical events (pure; no model needed)."""

from __future__ import annotations

import pytest

from gateway.canonical import StreamEvent, TextDelta, ToolCallDelta, ToolCallStart
from gateway.upstream.local.parse import parse_output
from gateway.upstream.local.split import EventSplitter

TOOLS = ("lookup", "create_refund")

TEXTS = [
    "Hello, world. How are you?",
    '<tool_call>\n{"name": "lookup", "arguments": {"q": "x <y>"}}\n</tool_call>',
    'Let me check.\n<tool_call>\n{"name": "lookup", "arguments": {"q": 1}}\n</tool_call>\n'
    '<tool_call>\n{"name": "create_refund", "arguments": {"amount": 5}}\n</tool_call>',
    '<tool_call>\n{"name": "lookup", "arguments": {"q": "unterminated',
    '{"name": "lookup", "arguments": {"q": "bare"}}',
    '```json\n{"name": "create_refund", "arguments": {"a": 1}}\n```',
    "a < b and b <tool but not a call",
    "",
]


def _run(text: str, size: int) -> list[StreamEvent]:
    splitter = EventSplitter(TOOLS)
    events: list[StreamEvent] = []
    for i in range(0, len(text), size):
        events.extend(splitter.feed(text[i : i + size]))
    events.extend(splitter.finish())
    return events


def _summary(events: list[StreamEvent]) -> tuple[str | None, list[tuple[str, str]]]:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    names = {e.index: e.name for e in events if isinstance(e, ToolCallStart)}
    args: dict[int, str] = {}
    for e in events:
        if isinstance(e, ToolCallDelta):
            args[e.index] = args.get(e.index, "") + e.arguments
    return text or None, [(names[i], args.get(i, "")) for i in sorted(names)]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
@pytest.mark.parametrize("text", TEXTS)
def test_stream_matches_whole_parse(text: str, size: int) -> None:
    content, calls = _summary(_run(text, size))
    whole = parse_output(text, TOOLS)
    assert content == whole.content
    assert calls == [(c.name, c.raw_arguments) for c in whole.calls]


def test_text_streams_before_the_end() -> None:
    splitter = EventSplitter(TOOLS)
    assert splitter.feed("Hello there ") == [TextDelta("Hello there")]
    assert splitter.feed("friend <tool") == [TextDelta(" friend")]
    assert splitter.feed("_call>") == []
    events = splitter.feed('{"name": "lookup", "arguments": {}}</tool_call>')
    assert [type(e) for e in events] == [ToolCallStart, ToolCallDelta]
    assert isinstance(events[0], ToolCallStart) and events[0].id.startswith("call_")
    assert splitter.call_count == 1
    assert splitter.finish() == []
