"""The Responses codecs without a server: request items -> canonical messages, the stream
encoder's events, and the Responses-upstream codec (table-driven)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.canonical import (
    Finish,
    ImagePart,
    Message,
    Reasoning,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.dialects.openai.decode import decode_chat_request
from gateway.dialects.responses.decode import decode_request
from gateway.dialects.responses.encode import ResponseShape
from gateway.dialects.responses.stream import ResponseStreamEncoder
from gateway.enforcement.holdback import FinalUsage
from gateway.errors import InvalidRequest, UnprocessableOutput, UpstreamError
from gateway.settings import ModelConfig
from gateway.upstream import openai_responses

CALL = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ("hi", [Message(role="user", content=(TextPart("hi"),))]),
        (
            [{"role": "developer", "content": "rules"}],
            [Message(role="system", content=(TextPart("rules"),))],
        ),
        (
            [
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "look"},
                        {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
                    ],
                }
            ],
            [
                Message(
                    role="user",
                    content=(TextPart("look"), ImagePart(url="https://x/y.png", detail="auto")),
                )
            ],
        ),
        # assistant text then two calls: one assistant turn, as both upstream formats need
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                    "id": "msg_1",
                    "status": "completed",
                },
                CALL,
                {**CALL, "call_id": "call_2"},
                OUTPUT,
            ],
            [
                Message(
                    role="assistant",
                    content=(TextPart("ok"),),
                    tool_calls=(ToolCall("call_1", "f", "{}"), ToolCall("call_2", "f", "{}")),
                ),
                Message(role="tool", content=(TextPart("ok"),), tool_call_id="call_1"),
            ],
        ),
        # reasoning stays with the turn it belongs to (a Responses upstream wants it back)
        (
            [{"type": "reasoning", "id": "rs_1", "summary": []}, CALL],
            [
                Message(
                    role="assistant",
                    tool_calls=(ToolCall("call_1", "f", "{}"),),
                    reasoning=(
                        Reasoning("responses", {"type": "reasoning", "id": "rs_1", "summary": []}),
                    ),
                )
            ],
        ),
        # ... and without a turn after it, it is dropped (OpenAI refuses it alone)
        (
            [{"role": "user", "content": "hi"}, {"type": "reasoning", "id": "rs_1", "summary": []}],
            [Message(role="user", content=(TextPart("hi"),))],
        ),
    ],
)
def test_input_items_to_messages(items: Any, expected: list[Message]) -> None:
    chat = decode_request({"model": "m", "input": items}).chat()
    assert list(chat.messages) == expected


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": [CALL | {"call_id": 3}]}, "input[0].call_id"),
        (
            {"model": "m", "input": "x", "tool_choice": {"type": "function", "name": "g"}},
            "tool_choice.name",
        ),
        ({"model": "m", "input": "x", "metadata": {"k": 1}}, "metadata.k"),
        ({"model": "m", "input": "x", "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        (
            {"model": "m", "input": "x", "tools": [{"type": "function", "name": ""}]},
            "tools[0].name",
        ),
        ({"model": "m", "input": "x", "background": True}, "background"),
        ({"model": "m", "input": "x", "conversation": "conv_1"}, "conversation"),
    ],
)
def test_bad_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_request(body)
    assert info.value.param == param


def test_nulls_are_absent_and_strict_defaults_true() -> None:
    decoded = decode_request(
        {
            "model": "m",
            "input": "x",
            "prompt": None,
            "background": None,
            "temperature": None,
            "tools": [{"type": "function", "name": "f", "strict": None, "parameters": None}],
        }
    )
    [tool] = decoded.tools
    assert tool.strict is True and tool.parameters["additionalProperties"] is False
    assert decoded.store is True and decoded.temperature is None


def _shape() -> ResponseShape:
    return ResponseShape(
        decode_request({"model": "m", "input": "x"}), response_id="resp_abc", created_at=1
    )


def _events(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(b.split(b"data: ", 1)[1]) for b in raw.split(b"\n\n") if b]


def test_stream_encoder_items_and_numbers() -> None:
    enc = ResponseStreamEncoder(_shape())
    raw = (
        enc.start()
        + enc.encode(
            [
                TextDelta("a"),
                TextDelta("b"),
                ToolCallStart(0, "call_1", "f"),
                ToolCallDelta(0, '{"x":'),
                ToolCallDelta(0, "1}"),
                TextDelta("after"),
                Finish("tool_calls"),
                FinalUsage(Usage(3, 4), schema_retries=1, upstream_calls=2),
            ]
        )
        + enc.finish()
    )
    events = _events(raw)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    done = events[-1]["response"]
    assert [(i["type"], i["id"]) for i in done["output"]] == [
        ("message", "msg_abc0000"),
        ("function_call", "fc_abc0001"),
        ("message", "msg_abc0002"),
    ]
    assert done["output"][1]["arguments"] == '{"x":1}'
    assert done["usage"]["total_tokens"] == 7 and done["usage"]["schema_retries"] == 1
    indices = {e["output_index"] for e in events if "output_index" in e}
    assert indices == {0, 1, 2}


def test_stream_encoder_failure_carries_the_envelope() -> None:
    enc = ResponseStreamEncoder(_shape())
    enc.start()
    exc = UnprocessableOutput("bad", code="tool_arguments_invalid", param="/x")
    failed, error = _events(enc.failed(exc, "req_1"))
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "tool_arguments_invalid"
    assert error["error"] == {
        "type": "invalid_request_error",
        "code": "tool_arguments_invalid",
        "message": "bad",
        "param": "/x",
    }
    assert (error["type"], error["param"], error["request_id"]) == ("error", "/x", "req_1")


def test_stream_encoder_refuses_arguments_after_the_call_ended() -> None:
    enc = ResponseStreamEncoder(_shape())
    enc.encode([ToolCallStart(0, "c", "f"), TextDelta("x")])
    with pytest.raises(UpstreamError):
        enc.encode([ToolCallDelta(0, "{}")])


MODEL = ModelConfig(name="m", provider="openai", upstream_model="up", api="responses")


def test_upstream_encode_round_trip() -> None:
    request = decode_chat_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "r"},
            ],
            "max_tokens": 9,
            "seed": 1,
            "reasoning_effort": "low",
        }
    )
    body = openai_responses.encode_request(request, MODEL, stream=False)
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "q"},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "r"},
    ]
    assert body["max_output_tokens"] == 9 and body["reasoning"] == {"effort": "low"}
    assert "seed" not in body and body["store"] is False


@pytest.mark.parametrize(
    ("data", "reason", "content"),
    [
        (
            {
                "status": "completed",
                "output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}],
            },
            "stop",
            "hi",
        ),
        (
            {
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [],
            },
            "length",
            None,
        ),
        (
            {
                "status": "completed",
                "output": [
                    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
                ],
            },
            "tool_calls",
            None,
        ),
    ],
)
def test_upstream_decode(data: dict[str, Any], reason: str, content: str | None) -> None:
    response = openai_responses.decode_response(data, MODEL)
    assert (response.finish_reason, response.content) == (reason, content)


@pytest.mark.parametrize(
    "data", [{"status": "failed", "error": {"message": "boom"}, "output": []}, {"output": 3}]
)
def test_upstream_decode_failures(data: dict[str, Any]) -> None:
    with pytest.raises(UpstreamError):
        openai_responses.decode_response(data, MODEL)


def test_upstream_event_parser_takes_arguments_from_done_alone() -> None:
    parser = openai_responses.EventParser()
    lines = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""},
        },
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "arguments": '{"a": 1}',
        },
        {
            "type": "response.completed",
            "response": {"status": "completed", "usage": {"input_tokens": 2, "output_tokens": 1}},
        },
    ]
    events = [e for line in lines for e in parser.feed_data(orjson.dumps(line).decode())]
    assert events[:2] == [ToolCallStart(0, "c", "f"), ToolCallDelta(0, '{"a": 1}')]
    assert isinstance(events[2], Finish) and events[2].reason == "tool_calls"
    assert parser.done
