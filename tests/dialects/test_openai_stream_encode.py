"""The OpenAI SSE chunk encoder: exact wire shape, and what the official SDK makes of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx2
import orjson
import pytest
from openai import APIError, OpenAI
from openai._streaming import Stream
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from gateway.canonical import (
    Finish,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
)
from gateway.dialects.openai.stream import DONE, KEEPALIVE, ChunkEncoder, error_event
from gateway.enforcement.correct import OutputRejected, Violation
from gateway.enforcement.holdback import FinalUsage, HeldEvent
from gateway.errors import UpstreamError


def encoder(include_usage: bool = True) -> ChunkEncoder:
    return ChunkEncoder(
        completion_id="chatcmpl-abc",
        model="amara-s1.2",
        created=1733000000,
        include_usage=include_usage,
    )


def sse_payloads(raw: bytes) -> list[str]:
    """The ``data:`` payloads of a byte stream, checking the SSE framing as it goes."""
    assert raw == b"" or raw.endswith(b"\n\n")
    out = []
    for block in raw.decode().split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        assert "\n" not in block
        out.append(block[len("data: ") :])
    return out


def chunks(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(p) for p in sse_payloads(raw) if p != "[DONE]"]


FINAL = FinalUsage(Usage(100, 20), schema_retries=1, upstream_calls=2)
CALL = '{"order_number": "582131", "amount_pence": 1250}'

CASES: list[tuple[str, Sequence[HeldEvent], list[dict[str, Any]]]] = [
    ("text", [TextDelta('Hé "q"\n')], [{"content": 'Hé "q"\n'}]),
    (
        "released call coalesces start and arguments",
        [ToolCallStart(0, "call_1", "create_refund"), ToolCallDelta(0, CALL)],
        [
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "create_refund", "arguments": CALL},
                    }
                ]
            }
        ],
    ),
    (
        "later fragments stay separate chunks",
        [ToolCallStart(1, "c", "lookup"), ToolCallDelta(1, '{"q"'), ToolCallDelta(1, ": 1}")],
        [
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "c",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q"'},
                    }
                ]
            },
            {"tool_calls": [{"index": 1, "function": {"arguments": ": 1}"}}]},
        ],
    ),
    (
        "a start alone has empty arguments",
        [ToolCallStart(2, "d", "lookup")],
        [
            {
                "tool_calls": [
                    {
                        "index": 2,
                        "id": "d",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": ""},
                    }
                ]
            }
        ],
    ),
    (
        "start followed by another call's delta is not merged",
        [ToolCallStart(0, "a", "x"), ToolCallDelta(1, "{}")],
        [
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "a",
                        "type": "function",
                        "function": {"name": "x", "arguments": ""},
                    }
                ]
            },
            {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]},
        ],
    ),
    ("upstream usage report is not forwarded", [UsageReport(Usage(1, 1))], []),
]


@pytest.mark.parametrize(("batch", "deltas"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_deltas(batch: Sequence[HeldEvent], deltas: list[dict[str, Any]]) -> None:
    got = chunks(encoder().encode(batch))
    assert [c["choices"][0]["delta"] for c in got] == deltas
    for c in got:
        ChatCompletionChunk.model_validate(c)
        assert (c["id"], c["object"], c["model"], c["created"]) == (
            "chatcmpl-abc",
            "chat.completion.chunk",
            "amara-s1.2",
            1733000000,
        )
        assert c["choices"][0]["finish_reason"] is None
        assert c["usage"] is None


@pytest.mark.parametrize("include_usage", [True, False])
def test_finish_usage_and_done(include_usage: bool) -> None:
    raw = encoder(include_usage).encode([Finish("tool_calls"), FINAL])
    payloads = sse_payloads(raw)
    assert payloads[-1] == "[DONE]"
    assert raw.endswith(DONE)
    got = [orjson.loads(p) for p in payloads[:-1]]
    assert got[0]["choices"] == [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}
    ]
    if include_usage:
        assert len(got) == 2
        assert got[1]["choices"] == []
        assert got[1]["usage"] == {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
            "schema_retries": 1,
        }
    else:
        assert len(got) == 1
        assert "usage" not in got[0]


def test_role_chunk() -> None:
    (c,) = chunks(encoder().role())
    assert c["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_sdk_accumulates_a_whole_stream() -> None:
    enc = encoder()
    raw = enc.role() + enc.encode(
        [
            TextDelta("Refunding "),
            TextDelta("now."),
            ToolCallStart(0, "call_1", "create_refund"),
            ToolCallDelta(0, CALL),
            ToolCallStart(1, "call_2", "lookup"),
            ToolCallDelta(1, '{"q"'),
            ToolCallDelta(1, ":1}"),
            Finish("tool_calls"),
            FINAL,
        ]
    )
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in chunks(raw):
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    done = state.get_final_completion()
    msg = done.choices[0].message
    assert msg.content == "Refunding now."
    assert msg.tool_calls is not None
    assert [(t.id, t.function.name, t.function.arguments) for t in msg.tool_calls] == [
        ("call_1", "create_refund", CALL),
        ("call_2", "lookup", '{"q":1}'),
    ]
    assert done.choices[0].finish_reason == "tool_calls"
    assert done.usage is not None and done.usage.total_tokens == 120
    assert (done.usage.model_extra or {}).get("schema_retries") == 1


def _sdk_stream(raw: bytes) -> Stream[ChatCompletionChunk]:
    request = httpx2.Request("POST", "http://gw/v1/chat/completions")
    response = httpx2.Response(
        200, content=raw, request=request, headers={"content-type": "text/event-stream"}
    )
    client = OpenAI(api_key="sk-test", base_url="http://gw/v1")
    return Stream(cast_to=ChatCompletionChunk, response=response, client=client)


ERRORS = [
    (
        OutputRejected(
            "Arguments for create_refund did not match the schema: /amount_pence must be integer.",
            code="tool_arguments_invalid",
            violations=[Violation("/amount_pence", "/amount_pence must be integer")],
        ),
        "invalid_request_error",
        "tool_arguments_invalid",
        "/amount_pence",
    ),
    (UpstreamError("Upstream connection reset."), "server_error", "upstream_error", None),
]


@pytest.mark.parametrize(("exc", "type_", "code", "param"), ERRORS)
def test_in_band_error_makes_the_sdk_raise(
    exc: Any, type_: str, code: str, param: str | None
) -> None:
    enc = encoder()
    raw = enc.role() + enc.encode([TextDelta("hi")]) + KEEPALIVE + error_event(exc, "req_1")
    payload = orjson.loads(error_event(exc, "req_1")[len("data: ") :])
    assert payload["request_id"] == "req_1"
    assert payload["error"]["message"] == exc.message
    seen = []
    with pytest.raises(APIError) as info:
        for chunk in _sdk_stream(raw):
            seen.append(chunk.choices[0].delta.content)
    assert seen == ["", "hi"]
    assert (info.value.type, info.value.code, info.value.param) == (type_, code, param)
    assert info.value.message == exc.message
