"""Table-driven tests for the Anthropic dialect codec (decode, encode, SSE encoder)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message as SDKMessage
from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

from gateway.canonical import (
    ChatResponse,
    Finish,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
)
from gateway.dialects.anthropic.decode import decode_request
from gateway.dialects.anthropic.encode import encode_error, encode_response, message_id
from gateway.dialects.anthropic.stream import MessageStreamEncoder, error_event
from gateway.enforcement.holdback import FinalUsage
from gateway.errors import InvalidRequest, UnprocessableOutput, UpstreamError

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def body(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "m",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    base.update(extra)
    return base


# --- decode: shape errors carry the exact param -------------------------------------

BAD_REQUESTS: list[tuple[str, dict[str, Any], str]] = [
    ("no model", {"model": None}, "model"),
    ("no max_tokens", {"max_tokens": None}, "max_tokens"),
    ("zero max_tokens", {"max_tokens": 0}, "max_tokens"),
    ("bool max_tokens", {"max_tokens": True}, "max_tokens"),
    ("messages not list", {"messages": "hi"}, "messages"),
    ("messages empty", {"messages": []}, "messages"),
    ("bad role", {"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ("no content", {"messages": [{"role": "user"}]}, "messages[0].content"),
    (
        "bad block type",
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": 3}]},
            ]
        },
        "messages[1].content[0].type",
    ),
    (
        "text not string",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
        "messages[0].content[0].text",
    ),
    (
        "tool_use input not object",
        {
            "messages": [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "[]"}],
                },
            ]
        },
        "messages[1].content[0].input",
    ),
    (
        "tool_result without id",
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
        "messages[0].content[0].tool_use_id",
    ),
    (
        "image bad source",
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "svg"}}]}]},
        "messages[0].content[0].source.type",
    ),
    ("system image", {"system": [{"type": "image", "source": {}}]}, "system[0].source.type"),
    ("tools not list", {"tools": {}}, "tools"),
    ("tool no name", {"tools": [{"input_schema": SCHEMA}]}, "tools[0].name"),
    (
        "tool schema not object",
        {"tools": [{"name": "a", "input_schema": SCHEMA}, {"name": "b", "input_schema": []}]},
        "tools[1].input_schema",
    ),
    (
        "tool strict not bool",
        {"tools": [{"name": "a", "input_schema": SCHEMA, "strict": "yes"}]},
        "tools[0].strict",
    ),
    ("tool type not string", {"tools": [{"type": 1, "name": "web_search"}]}, "tools[0].type"),
    (
        "duplicate tool",
        {"tools": [{"name": "a", "input_schema": SCHEMA}, {"name": "a", "input_schema": SCHEMA}]},
        "tools[1].name",
    ),
    ("tool_choice bad type", {"tool_choice": {"type": "some"}}, "tool_choice.type"),
    ("tool_choice no name", {"tool_choice": {"type": "tool"}}, "tool_choice.name"),
    (
        "tool_choice unknown tool",
        {
            "tools": [{"name": "a", "input_schema": SCHEMA}],
            "tool_choice": {"type": "tool", "name": "b"},
        },
        "tool_choice.name",
    ),
    (
        "output format type",
        {"output_config": {"format": {"type": "text"}}},
        "output_config.format.type",
    ),
    (
        "output format schema",
        {"output_config": {"format": {"type": "json_schema", "schema": True}}},
        "output_config.format.schema",
    ),
    ("old output format", {"output_format": {"type": "json_schema"}}, "output_format.schema"),
    ("stop not list", {"stop_sequences": "x"}, "stop_sequences"),
    ("stop item", {"stop_sequences": ["a", 1]}, "stop_sequences[1]"),
    ("temperature str", {"temperature": "hot"}, "temperature"),
    ("stream str", {"stream": "yes"}, "stream"),
    ("metadata user", {"metadata": {"user_id": 5}}, "metadata.user_id"),
]


@pytest.mark.parametrize(
    ("changes", "param"), [(c, p) for _, c, p in BAD_REQUESTS], ids=[n for n, _, _ in BAD_REQUESTS]
)
def test_decode_rejects_bad_shape_with_param(changes: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_request(body(**changes))
    assert info.value.param == param
    assert info.value.status == 400


def test_decode_body_not_object() -> None:
    with pytest.raises(InvalidRequest):
        decode_request([1, 2])


def test_decode_full_conversation() -> None:
    decoded = decode_request(
        body(
            system=[{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}],
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                        {"type": "text", "text": "calling"},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"n": 1}},
                        {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "is_error": True,
                            "content": [{"type": "text", "text": "boom"}],
                        },
                        {"type": "text", "text": "and?"},
                    ],
                },
            ],
            tools=[
                {"name": "f", "description": "d", "input_schema": SCHEMA, "strict": True},
                {"name": "g", "input_schema": {"type": "object"}},
            ],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            stop_sequences=["END"],
            temperature=0.5,
            top_p=1,
            metadata={"user_id": "u1"},
            stream=True,
            top_k=5,
        )
    )
    req = decoded.request
    roles = [m.role for m in req.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assert req.messages[0].text == "be brief"
    assert req.messages[1].content[1] == ImagePart(media_type="image/png", data="AA==")
    assistant = req.messages[2]
    assert assistant.text == "calling"
    assert assistant.tool_calls == (
        ToolCall("toolu_1", "f", '{"n":1}'),
        ToolCall("toolu_2", "f", "{}"),
    )
    assert req.messages[3].tool_call_id == "toolu_1"
    assert not req.messages[3].is_error
    assert req.messages[4].is_error and req.messages[4].text == "boom"
    assert req.messages[5].content == (TextPart("and?"),)
    assert [t.strict for t in req.tools] == [True, False]
    assert req.tools[0].parameters == SCHEMA and req.tools[0].description == "d"
    assert decoded.tool_params == ("tools[0]", "tools[1]")
    assert req.tool_choice == "required"
    assert req.parallel_tool_calls is False
    assert req.stop == ("END",)
    assert (req.temperature, req.top_p, req.user, req.stream) == (0.5, 1.0, "u1", True)
    assert req.response_format is None and decoded.format_param is None


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "f"}, ForcedTool("f")),
    ],
)
def test_decode_tool_choice(choice: dict[str, Any], expected: object) -> None:
    decoded = decode_request(
        body(tools=[{"name": "f", "input_schema": SCHEMA}], tool_choice=choice)
    )
    assert decoded.request.tool_choice == expected
    assert decoded.request.parallel_tool_calls is None


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        (
            {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},
            "output_config.format.schema",
        ),
        ({"output_format": {"type": "json_schema", "schema": SCHEMA}}, "output_format.schema"),
        (
            {
                "output_config": {
                    "effort": "low",
                    "format": {"type": "json_schema", "schema": SCHEMA},
                },
                "output_format": {"type": "json_schema", "schema": {"type": "object"}},
            },
            "output_config.format.schema",
        ),
    ],
)
def test_decode_json_output(extra: dict[str, Any], param: str) -> None:
    decoded = decode_request(body(**extra))
    assert decoded.request.response_format == JsonSchemaFormat(schema=SCHEMA, strict=True)
    assert decoded.format_param == param


# --- encode ----------------------------------------------------------------------------


def response(**changes: Any) -> ChatResponse:
    base: dict[str, Any] = {
        "id": "chatcmpl-abc",
        "model": "served",
        "content": None,
        "tool_calls": (),
        "finish_reason": "stop",
        "usage": Usage(10, 5),
    }
    base.update(changes)
    return ChatResponse(**base)


@pytest.mark.parametrize(
    ("resp", "content", "stop_reason"),
    [
        (response(content="hello"), [{"type": "text", "text": "hello"}], "end_turn"),
        (
            response(content="cut", finish_reason="length"),
            [{"type": "text", "text": "cut"}],
            "max_tokens",
        ),
        (
            response(
                content="ok",
                tool_calls=(ToolCall("call_1", "f", '{"n": 2}'),),
                finish_reason="tool_calls",
            ),
            [
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "call_1", "name": "f", "input": {"n": 2}},
            ],
            "tool_use",
        ),
        (response(content="", finish_reason="content_filter"), [], "refusal"),
        (
            response(tool_calls=(ToolCall("c", "f", "{}"),), finish_reason="stop"),
            [{"type": "tool_use", "id": "c", "name": "f", "input": {}}],
            "tool_use",
        ),
    ],
)
def test_encode_response(resp: ChatResponse, content: list[Any], stop_reason: str) -> None:
    out = encode_response(resp, model="amara", schema_retries=1)
    assert out["content"] == content
    assert out["stop_reason"] == stop_reason
    assert out["model"] == "amara"
    assert out["id"].startswith("msg_")
    assert out["usage"] == {
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
        "schema_retries": 1,
    }
    # The official SDK model accepts it.
    parsed = SDKMessage.model_validate(out)
    assert parsed.stop_reason == stop_reason


@pytest.mark.parametrize(
    ("resp", "override"),
    [(response(content="a"), "END"), (response(content="a", stop_sequence="END"), None)],
    ids=["argument", "from-upstream"],
)
def test_encode_stop_sequence(resp: ChatResponse, override: str | None) -> None:
    out = encode_response(resp, model="m", stop_sequence=override)
    assert (out["stop_reason"], out["stop_sequence"]) == ("stop_sequence", "END")


def test_stream_stop_sequence() -> None:
    _, msg = run_encoder([TextDelta("a"), Finish("stop", "END")])
    assert (msg.stop_reason, msg.stop_sequence) == ("stop_sequence", "END")


@pytest.mark.parametrize("raw", ["{not json", "[1]", '"s"'])
def test_encode_non_object_arguments_is_upstream_error(raw: str) -> None:
    resp = response(tool_calls=(ToolCall("c", "g", raw),), finish_reason="tool_calls")
    with pytest.raises(UpstreamError):
        encode_response(resp, model="m")


@pytest.mark.parametrize(
    ("upstream", "prefix"),
    [("msg_01", "msg_01"), ("chatcmpl-x.y", "msg_chatcmpl-xy"), ("", "msg_")],
)
def test_message_id(upstream: str, prefix: str) -> None:
    assert message_id(upstream).startswith(prefix)


def test_encode_error_is_unified_envelope() -> None:
    err = UnprocessableOutput("Arguments for f did not match", param="/n")
    out = encode_error(err, "req_1")
    assert out == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "code": "tool_arguments_invalid",
            "message": "Arguments for f did not match",
            "param": "/n",
        },
        "request_id": "req_1",
    }


# --- SSE encoder, checked through the SDK's own accumulator ------------------------------

EVENTS = TypeAdapter(RawMessageStreamEvent)


def parse_sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk:
            continue
        name_line, data_line = chunk.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        data = orjson.loads(data_line[6:])
        assert data["type"] == name_line[7:]
        out.append((name_line[7:], data))
    return out


def run_encoder(
    events: list[StreamEvent | FinalUsage], retries: int | None = None
) -> tuple[bytes, Any]:
    enc = MessageStreamEncoder(model="amara", message_id="msg_1")
    raw = enc.start()
    for e in events:
        raw += enc.encode(e)
    raw += enc.finish(schema_retries=retries)
    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for _, data in parse_sse(raw):
        snapshot = accumulate_event(
            event=EVENTS.validate_python(data), current_snapshot=snapshot, json_bufs=bufs
        )
    return raw, snapshot


def test_stream_text_then_tools() -> None:
    raw, msg = run_encoder(
        [
            TextDelta("Hel"),
            TextDelta("lo"),
            ToolCallStart(0, "call_a", "f"),
            ToolCallDelta(0, '{"n":'),
            ToolCallDelta(0, "1}"),
            ToolCallStart(1, "call_b", "g"),
            ToolCallDelta(1, "{}"),
            Finish("tool_calls"),
            UsageReport(Usage(7, 3)),
            UsageReport(Usage(9, 2)),
        ],
        retries=1,
    )
    names = [n for n, _ in parse_sse(raw)]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert msg.content[0].text == "Hello"
    assert [(b.id, b.name, b.input) for b in msg.content[1:]] == [
        ("call_a", "f", {"n": 1}),
        ("call_b", "g", {}),
    ]
    assert msg.stop_reason == "tool_use"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (16, 5)
    delta = parse_sse(raw)[-2][1]
    assert delta["usage"]["schema_retries"] == 1


def test_stream_final_usage_from_holdback_wins() -> None:
    raw, msg = run_encoder(
        [
            TextDelta("hi"),
            Finish("stop"),
            UsageReport(Usage(1, 1)),
            FinalUsage(usage=Usage(40, 12), schema_retries=2, upstream_calls=3),
        ]
    )
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (40, 12)
    assert parse_sse(raw)[-2][1]["usage"]["schema_retries"] == 2


def test_stream_text_after_tool_opens_new_block() -> None:
    _raw, msg = run_encoder(
        [
            ToolCallStart(0, "c", "f"),
            ToolCallDelta(0, "{}"),
            TextDelta(""),
            TextDelta("after"),
            Finish("stop"),
        ]
    )
    assert [b.type for b in msg.content] == ["tool_use", "text"]
    assert msg.content[1].text == "after"
    assert msg.stop_reason == "tool_use"  # a turn with tool calls, even if it said "stop"


def test_stream_error_event() -> None:
    err = UnprocessableOutput("bad", param="/n")
    [(name, data)] = parse_sse(error_event(err, "req_9"))
    assert name == "error"
    assert data["error"]["code"] == "tool_arguments_invalid"
    assert data["error"]["param"] == "/n"
    assert data["request_id"] == "req_9"
