"""Table-driven tests for the Anthropic upstream codec (canonical <-> Messages wire)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from gateway.canonical import (
    ChatRequest,
    Finish,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    Message,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    ToolSpec,
    Usage,
    UsageReport,
)
from gateway.errors import UpstreamError
from gateway.settings import ModelConfig
from gateway.upstream.anthropic import decode_response
from gateway.upstream.anthropic_codec import StreamDecoder, encode_request
from gateway.upstream.lines import sse_events

MODEL = ModelConfig(name="claude", provider="anthropic", upstream_model="served-claude")
CONSTRAINED = ModelConfig(
    name="claude", provider="anthropic", upstream_model="served-claude", constrained=True
)
SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def req(**changes: Any) -> ChatRequest:
    base: dict[str, Any] = {
        "model": "claude",
        "messages": (Message(role="user", content=(TextPart("hi"),)),),
    }
    base.update(changes)
    return ChatRequest(**base)


def test_encode_conversation_merges_turns() -> None:
    messages = (
        Message(role="system", content=(TextPart("sys1"),)),
        Message(role="user", content=(TextPart("q"), ImagePart(url="data:image/jpeg;base64,QUJD"))),
        Message(
            role="assistant",
            content=(TextPart(""),),
            tool_calls=(ToolCall("c1", "f", '{"a":1}'), ToolCall("c2", "f", "not json")),
        ),
        Message(role="tool", content=(TextPart("r1"),), tool_call_id="c1"),
        Message(role="tool", content=(TextPart("r2"),), tool_call_id="c2", is_error=True),
        Message(role="system", content=(TextPart("sys2"),)),
        Message(role="user", content=(TextPart(""),)),
        Message(role="assistant", content=(TextPart(""),)),
        Message(role="user", content=(ImagePart(url="https://x/y.png"),)),
    )
    wire = encode_request(req(messages=messages), MODEL, stream=False)
    assert wire["model"] == "served-claude"
    assert wire["system"] == "sys1\n\nsys2"
    assert wire["max_tokens"] == 4096
    assert "stream" not in wire
    assert wire["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "q"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
                {
                    "type": "tool_use",
                    "id": "c2",
                    "name": "f",
                    "input": {"_raw_arguments": "not json"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": [{"type": "text", "text": "r1"}],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": [{"type": "text", "text": "r2"}],
                    "is_error": True,
                },
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        (None, None, None),
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        (ForcedTool("f"), None, {"type": "tool", "name": "f"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (ForcedTool("f"), False, {"type": "tool", "name": "f", "disable_parallel_tool_use": True}),
    ],
)
def test_encode_tool_choice(
    choice: ToolChoice | None, parallel: bool | None, expected: dict[str, Any] | None
) -> None:
    tools = (ToolSpec("f", SCHEMA, strict=True),)
    wire = encode_request(
        req(tools=tools, tool_choice=choice, parallel_tool_calls=parallel), MODEL, stream=True
    )
    assert wire.get("tool_choice") == expected
    assert wire["stream"] is True


@pytest.mark.parametrize(("model", "strict_sent"), [(MODEL, False), (CONSTRAINED, True)])
def test_encode_strict_only_to_constrained(model: ModelConfig, strict_sent: bool) -> None:
    tools = (ToolSpec("f", SCHEMA, description="d", strict=True), ToolSpec("g", {"type": "object"}))
    wire = encode_request(req(tools=tools), model, stream=False)
    assert wire["tools"][0] == {
        "name": "f",
        "input_schema": SCHEMA,
        "description": "d",
        **({"strict": True} if strict_sent else {}),
    }
    assert wire["tools"][1] == {"name": "g", "input_schema": {"type": "object"}}


BOUNDED = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}},
    "required": ["n"],
    "additionalProperties": False,
}
PROJECTED = {
    "type": "object",
    "properties": {"n": {"type": "integer", "description": "{minimum: 1}"}},
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(("model", "sent"), [(MODEL, BOUNDED), (CONSTRAINED, PROJECTED)])
def test_only_what_anthropic_constrains_gets_its_subset(
    model: ModelConfig, sent: dict[str, Any]
) -> None:
    tools = (ToolSpec("f", BOUNDED, strict=True), ToolSpec("g", BOUNDED))
    wire = encode_request(
        req(tools=tools, response_format=JsonSchemaFormat(schema=BOUNDED, strict=True)),
        model,
        stream=False,
    )
    assert wire["tools"][0]["input_schema"] == sent  # strict, constrained: the subset
    assert wire["tools"][1]["input_schema"] == BOUNDED  # not constrained: as written
    assert wire["output_config"]["format"]["schema"] == PROJECTED  # always constrained


def test_encode_sampling_and_output_format() -> None:
    wire = encode_request(
        req(
            response_format=JsonSchemaFormat(schema=SCHEMA, strict=True),
            temperature=0.1,
            top_p=0.9,
            stop=("X",),
            user="u",
            max_tokens=9,
        ),
        MODEL,
        stream=False,
    )
    assert wire["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert (wire["temperature"], wire["top_p"], wire["stop_sequences"]) == (0.1, 0.9, ["X"])
    assert wire["metadata"] == {"user_id": "u"}
    assert wire["max_tokens"] == 9


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "stop"),
        ("something_new", "stop"),
    ],
)
def test_decode_response(stop: str, finish: str) -> None:
    body = {
        "id": "msg_1",
        "model": "served",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "thinking", "thinking": "..."},
            {"type": "text", "text": "b"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": [1, "é"]}},
        ],
        "stop_reason": stop,
        "usage": {"input_tokens": 4, "cache_read_input_tokens": 2, "output_tokens": 3},
    }
    resp = decode_response(body, MODEL)
    # A refusal's words are the refusal, not content.
    assert (resp.content, resp.refusal) == ((None, "ab") if stop == "refusal" else ("ab", None))
    assert resp.tool_calls == (ToolCall("toolu_1", "f", orjson.dumps({"x": [1, "é"]}).decode()),)
    assert resp.finish_reason == finish
    assert resp.usage == Usage(6, 3, cache_read_tokens=2)  # the prompt includes the cache


def test_decode_response_stop_sequence() -> None:
    body = {
        "id": "msg_2",
        "content": [{"type": "text", "text": "a"}],
        "stop_reason": "stop_sequence",
        "stop_sequence": "END",
    }
    resp = decode_response(body, MODEL)
    assert (resp.finish_reason, resp.stop_sequence) == ("stop", "END")
    assert decode_response({**body, "stop_sequence": None}, MODEL).stop_sequence is None


def test_decode_response_malformed() -> None:
    with pytest.raises(UpstreamError):
        decode_response({"content": "x"}, MODEL)


def sse_lines(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [": keep-alive", ""]
    for name, data in events:
        lines += [f"event: {name}", "data: " + orjson.dumps(data).decode(), ""]
    return lines


async def decode_stream(lines: list[str]) -> list[StreamEvent]:
    async def gen() -> AsyncIterator[str]:
        for line in lines:
            yield line

    decoder = StreamDecoder()
    out: list[StreamEvent] = []
    async for name, data in sse_events(gen()):
        out += decoder.feed(name, data)
    return out + decoder.end()


def _start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }


def _delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


FULL_STREAM: list[tuple[str, dict[str, Any]]] = [
    (
        "message_start",
        {
            "type": "message_start",
            "message": {"id": "msg_1", "usage": {"input_tokens": 11, "output_tokens": 1}},
        },
    ),
    ("ping", {"type": "ping"}),
    _start(0, {"type": "text", "text": ""}),
    _delta(0, {"type": "text_delta", "text": "Hi"}),
    _stop(0),
    _start(1, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
    _delta(1, {"type": "input_json_delta", "partial_json": ""}),
    _delta(1, {"type": "input_json_delta", "partial_json": '{"a"'}),
    _delta(1, {"type": "input_json_delta", "partial_json": ":1}"}),
    _stop(1),
    _start(2, {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}),
    _stop(2),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 20},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]


async def test_stream_decoder_stop_sequence() -> None:
    stop = (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
            "usage": {"output_tokens": 2},
        },
    )
    events = await decode_stream(sse_lines([*FULL_STREAM[:5], stop, FULL_STREAM[-1]]))
    assert events[-2] == Finish("stop", "END")


async def test_stream_decoder_full() -> None:
    events = await decode_stream(sse_lines(FULL_STREAM))
    assert events == [
        TextDelta("Hi"),
        ToolCallStart(0, "toolu_a", "f"),
        ToolCallDelta(0, '{"a"'),
        ToolCallDelta(0, ":1}"),
        ToolCallStart(1, "toolu_b", "g"),
        ToolCallDelta(1, "{}"),
        Finish("tool_calls"),
        UsageReport(Usage(11, 20)),
    ]


@pytest.mark.parametrize(
    "lines",
    [
        sse_lines(FULL_STREAM[:-1]),  # cut before message_stop
        sse_lines(
            [
                *FULL_STREAM[:3],
                (
                    "error",
                    {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
                ),
            ]
        ),
        ["event: message_start", "data: {not json", ""],
    ],
    ids=["truncated", "error-event", "not-json"],
)
async def test_stream_decoder_failures(lines: list[str]) -> None:
    with pytest.raises(UpstreamError):
        await decode_stream(lines)
