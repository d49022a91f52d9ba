"""The usage codecs, table-driven: each upstream wire's usage object to the canonical
counts, and the canonical counts to each dialect's usage object, checked against the
vendor SDK's own type of it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from anthropic.types import MessageDeltaUsage
from anthropic.types import Usage as AnthropicUsage
from openai.types import CompletionUsage
from openai.types.responses import ResponseUsage

from gateway.canonical import Usage
from gateway.dialects.anthropic.encode import encode_usage as messages_usage
from gateway.dialects.openai.encode import encode_usage as chat_usage
from gateway.dialects.responses.encode import encode_usage as responses_usage
from gateway.upstream.anthropic_codec import StreamDecoder, usage_of
from gateway.upstream.openai import decode_usage as chat_wire
from gateway.upstream.openai_responses import decode_usage as responses_wire

FULL = Usage(40, 12, cache_read_tokens=25, cache_creation_tokens=5, reasoning_tokens=7)


@pytest.mark.parametrize(
    ("decode", "raw", "expected"),
    [
        (
            chat_wire,
            {
                "prompt_tokens": 40,
                "completion_tokens": 12,
                "total_tokens": 52,
                "prompt_tokens_details": {"cached_tokens": 25, "cache_write_tokens": 5},
                "completion_tokens_details": {"reasoning_tokens": 7},
            },
            FULL,
        ),
        (
            chat_wire,
            {"prompt_tokens": 40, "completion_tokens": 12, "prompt_tokens_details": None},
            Usage(40, 12),
        ),
        (chat_wire, None, None),
        (chat_wire, {}, None),
        (
            responses_wire,
            {
                "input_tokens": 40,
                "output_tokens": 12,
                "total_tokens": 52,
                "input_tokens_details": {"cached_tokens": 25, "cache_write_tokens": 5},
                "output_tokens_details": {"reasoning_tokens": 7},
            },
            FULL,
        ),
        (responses_wire, None, None),
        (
            usage_of,
            {
                "input_tokens": 10,
                "cache_creation_input_tokens": 5,
                "cache_read_input_tokens": 25,
                "output_tokens": 12,
                "output_tokens_details": {"thinking_tokens": 7},
            },
            FULL,
        ),
        (
            usage_of,
            {
                "input_tokens": 10,
                "cache_creation_input_tokens": None,
                "cache_read_input_tokens": None,
                "output_tokens": 12,
            },
            Usage(10, 12),
        ),
        (usage_of, None, None),
    ],
    ids=[
        "chat",
        "chat-no-details",
        "chat-none",
        "chat-empty",
        "responses",
        "responses-none",
        "messages",
        "messages-null-cache",
        "messages-none",
    ],
)
def test_each_wire_decodes_to_the_canonical_counts(
    decode: Any, raw: Any, expected: Usage | None
) -> None:
    assert decode(raw) == expected


def _events(*events: dict[str, Any]) -> list[Any]:
    decoder = StreamDecoder()
    out: list[Any] = []
    for event in events:
        out.extend(decoder.feed(str(event["type"]), orjson.dumps(event).decode()))
    return out


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 25,
            "output_tokens": 1,
        },
    },
}
STOP = {"type": "message_stop"}


@pytest.mark.parametrize(
    ("delta_usage", "expected"),
    [
        # message_start's input counts stand when message_delta leaves them out ...
        ({"output_tokens": 12, "output_tokens_details": {"thinking_tokens": 7}}, FULL),
        # ... and a cumulative message_delta that repeats them (or revises them) wins.
        (
            {
                "input_tokens": 10,
                "cache_creation_input_tokens": 5,
                "cache_read_input_tokens": 30,
                "output_tokens": 12,
                "output_tokens_details": {"thinking_tokens": 7},
            },
            Usage(45, 12, cache_read_tokens=30, cache_creation_tokens=5, reasoning_tokens=7),
        ),
        ({"input_tokens": None, "output_tokens": 12}, Usage(40, 12, 25, 5)),
    ],
)
def test_a_messages_stream_keeps_each_count_as_last_reported(
    delta_usage: dict[str, Any], expected: Usage
) -> None:
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta_usage}
    report = _events(START, delta, STOP)[-1]
    assert report.usage == expected


def test_a_messages_stream_without_usage_reports_none() -> None:
    start = {"type": "message_start", "message": {"id": "msg_1"}}
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
    events = _events(start, delta, STOP)
    assert [type(e).__name__ for e in events] == ["Finish"]  # the hold-back estimates


@pytest.mark.parametrize(
    "usage", [FULL, Usage(3, 4), Usage(9, 2, estimated=True)], ids=["details", "plain", "estimated"]
)
def test_each_dialect_writes_its_sdk_type(usage: Usage) -> None:
    chat = CompletionUsage.model_validate(chat_usage(usage, 1))
    assert chat.prompt_tokens == usage.prompt_tokens
    assert chat.prompt_tokens_details is not None and chat.completion_tokens_details is not None
    assert chat.prompt_tokens_details.cached_tokens == usage.cache_read_tokens
    assert (chat.prompt_tokens_details.cache_write_tokens or 0) == usage.cache_creation_tokens
    assert chat.completion_tokens_details.reasoning_tokens == usage.reasoning_tokens

    resp = ResponseUsage.model_validate(responses_usage(usage, 1))
    assert resp.input_tokens == usage.prompt_tokens
    assert resp.input_tokens_details.cached_tokens == usage.cache_read_tokens
    assert resp.input_tokens_details.cache_write_tokens == usage.cache_creation_tokens
    assert resp.output_tokens_details.reasoning_tokens == usage.reasoning_tokens

    body = messages_usage(usage, 1)
    for model in (AnthropicUsage.model_validate(body), MessageDeltaUsage.model_validate(body)):
        assert model.input_tokens == (
            usage.prompt_tokens - usage.cache_read_tokens - usage.cache_creation_tokens
        )
        assert model.cache_read_input_tokens == usage.cache_read_tokens
        assert model.cache_creation_input_tokens == usage.cache_creation_tokens
        thinking = model.output_tokens_details.thinking_tokens if model.output_tokens_details else 0
        assert thinking == usage.reasoning_tokens

    for out in (chat, resp, AnthropicUsage.model_validate(body)):
        assert (out.model_extra or {}).get("schema_retries") == 1
        assert (out.model_extra or {}).get("estimated", False) is usage.estimated
