"""Chat-completions wire <-> canonical: the dialect decoder and the upstream codec."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.canonical import (
    ChatRequest,
    Finish,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    Message,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
    UsageReport,
)
from gateway.dialects.openai.decode import decode_chat_request
from gateway.errors import UpstreamError
from gateway.settings import ModelConfig
from gateway.upstream.openai import ChunkParser, decode_response, encode_request

MODEL = ModelConfig(name="m", provider="openai", upstream_model="served")
USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("body", "check"),
    [
        (
            {"model": "m", "messages": [USER]},
            lambda r: r.messages == (Message("user", (TextPart("hi"),)),),
        ),
        (
            {"model": "m", "messages": [{"role": "developer", "content": "be nice"}, USER]},
            lambda r: r.messages[0].role == "system",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "look"},
                            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                        ],
                    }
                ],
            },
            lambda r: r.messages[0].content == (TextPart("look"), ImagePart(url="https://x/y.png")),
        ),
        (
            {
                "model": "m",
                "messages": [
                    USER,
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "done"},
                ],
            },
            lambda r: (
                r.messages[1].tool_calls == (ToolCall("c1", "f", "{}"),)
                and r.messages[2].tool_call_id == "c1"
            ),
        ),
        (
            {
                "model": "m",
                "messages": [USER],
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "strict": True, "parameters": {"type": "object"}},
                    },
                    {"type": "function", "function": {"name": "g"}},
                ],
                "tool_choice": {"type": "function", "function": {"name": "g"}},
            },
            lambda r: (
                r.tools[0] == ToolSpec("f", {"type": "object"}, None, True)
                and not r.tools[1].strict
                and r.tool_choice == ForcedTool("g")
            ),
        ),
        (
            {
                "model": "m",
                "messages": [USER],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "v", "strict": True, "schema": {"type": "object"}},
                },
            },
            lambda r: r.response_format == JsonSchemaFormat({"type": "object"}, "v", True),
        ),
        (
            {
                "model": "m",
                "messages": [USER],
                "max_completion_tokens": 7,
                "max_tokens": 9,
                "stop": "END",
                "seed": 3,
                "temperature": 0,
            },
            lambda r: (
                (r.max_tokens, r.stop, r.temperature) == (7, ("END",), 0.0)
                and r.origin is not None
                and r.origin.screen("messages").dropped == ("seed",)
            ),
        ),
    ],
    ids=["text", "developer", "parts", "tool-turns", "tools", "json_schema", "params"],
)
def test_decode(body: dict[str, Any], check: Any) -> None:
    assert check(decode_chat_request(body))


def test_encode_request_round_trips_what_matters() -> None:
    request = ChatRequest(
        model="m",
        messages=(
            Message("system", (TextPart("s"),)),
            Message("user", (TextPart("u"), ImagePart(data="AAA", media_type="image/jpeg"))),
            Message("assistant", tool_calls=(ToolCall("c1", "f", '{"a":1}'),)),
            Message("tool", (TextPart("r"),), tool_call_id="c1"),
        ),
        tools=(
            ToolSpec("f", {"type": "object"}, "does f", strict=True),
            ToolSpec("g", {"type": "object"}),
        ),
        tool_choice=ForcedTool("f"),
        response_format=JsonSchemaFormat({"type": "object"}, "v", strict=False),
        max_tokens=5,
    )
    body = encode_request(request, MODEL, stream=True)
    assert body["model"] == "served"
    assert body["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,AAA"},
    }
    assert body["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
        ],
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "r"}
    assert body["tools"][0]["function"] == {
        "name": "f",
        "parameters": {"type": "object"},
        "description": "does f",
        "strict": True,
    }
    assert "strict" not in body["tools"][1]["function"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "v", "schema": {"type": "object"}},
    }
    assert (body["max_completion_tokens"], body["stream"]) == (5, True)
    assert "max_tokens" not in body  # reasoning models refuse the deprecated field
    assert body["stream_options"] == {"include_usage": True}
    # and the dialect decodes it back to the same messages
    assert decode_chat_request({**body, "model": "m"}).messages[2:] == request.messages[2:]


@pytest.mark.parametrize(
    ("data", "content", "calls", "finish"),
    [
        ({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}, "hi", (), "stop"),
        (
            {
                "choices": [
                    {
                        "message": {
                            "content": None,
                            "tool_calls": [
                                {"id": "a", "function": {"name": "f", "arguments": "{}"}}
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
            None,
            (ToolCall("a", "f", "{}"),),
            "tool_calls",
        ),
        (
            {"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]},
            "x",
            (),
            "length",
        ),
    ],
)
def test_decode_response(data: dict[str, Any], content: Any, calls: Any, finish: str) -> None:
    r = decode_response({**data, "usage": {"prompt_tokens": 3, "completion_tokens": 4}}, MODEL)
    assert (r.content, r.tool_calls, r.finish_reason, r.usage) == (
        content,
        calls,
        finish,
        Usage(3, 4),
    )


def test_decode_response_bad_shape() -> None:
    with pytest.raises(UpstreamError):
        decode_response({"choices": []}, MODEL)


def test_chunk_parser() -> None:
    p = ChunkParser()
    lines = [
        'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
        "",
        'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}',
        ": keep-alive",
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1",'
        '"type":"function","function":{"name":"f","arguments":""}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        '"function":{"arguments":"{\\"a\\""}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        '"function":{"arguments":":1}"}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6}}',
        "data: [DONE]",
    ]
    events = [e for line in lines if line.startswith("data:") for e in p.feed_data(line[5:])]
    assert events == [
        TextDelta("Hi"),
        ToolCallStart(0, "c1", "f"),
        ToolCallDelta(0, '{"a"'),
        ToolCallDelta(0, ":1}"),
        Finish("tool_calls"),
        UsageReport(Usage(5, 6)),
    ]
    assert p.done and p.finished


def test_chunk_parser_error_chunk() -> None:
    with pytest.raises(UpstreamError):
        ChunkParser().feed_data('{"error": {"message": "boom"}}')
