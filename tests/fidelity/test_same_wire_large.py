"""Same wire, same bytes, for a body large enough that its depth check encodes it: the
upstream gets the bytes a small body's path would send, the gateway's replacements
included (a member it changed is encoded anew, one it left is copied from that check)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

PAD = "x" * 6000  # past the size below which the depth check only counts brackets
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
CHAT_TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA, "strict": True}},
    {"type": "function", "function": {"name": "note", "parameters": {"type": "object"}}},
]


def _chat_strict(oai: openai.OpenAI, text: str) -> None:
    oai.chat.completions.create(
        model="chat-up",
        messages=[
            {"role": "user", "content": text},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "note", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "noted"},
        ],
        tools=CHAT_TOOLS,
        n=2,
        stop=["END"],
    )


def _chat_stream(oai: openai.OpenAI, text: str) -> None:
    with oai.chat.completions.create(
        model="chat-legacy",
        messages=[{"role": "user", "content": text}],
        tools=CHAT_TOOLS,
        stream=True,
        stream_options={"include_usage": False},
        max_completion_tokens=50,
    ) as stream:
        for _ in stream:
            pass


def _responses(oai: openai.OpenAI, text: str) -> None:
    oai.responses.create(
        model="resp-up",
        input=[{"type": "message", "role": "user", "content": text}],
        tools=[{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": True}],
        include=["reasoning.encrypted_content"],
    )


def _messages_correction(ant: anthropic.Anthropic, text: str) -> None:
    ant.messages.create(
        model="msg-up",
        max_tokens=256,
        messages=[{"role": "user", "content": text}],
        tools=[{"name": "get_weather", "input_schema": SCHEMA, "strict": True}],
        stop_sequences=["END"],
    )


Sender = Callable[[openai.OpenAI, anthropic.Anthropic, str], None]
CASES: dict[str, tuple[Sender, tuple[Reply, ...]]] = {
    "chat, a strict tool unflagged, two choices": (
        lambda oai, ant, text: _chat_strict(oai, text),
        (Reply(content="ok"), Reply(content="ok")),
    ),
    "chat stream, the engine's token field": (
        lambda oai, ant, text: _chat_stream(oai, text),
        (Reply(content="ok"),),
    ),
    "responses, store off": (
        lambda oai, ant, text: _responses(oai, text),
        (Reply(content="ok"),),
    ),
    "messages, a correction's turns appended": (
        lambda oai, ant, text: _messages_correction(ant, text),
        (
            Reply(tool_calls=[Call("get_weather", '{"city": 3}', id="toolu_bad")]),
            Reply(tool_calls=[Call("get_weather", '{"city": "Oslo"}')]),
        ),
    ),
}


def _sent(
    case: str,
    text: str,
    oai: openai.OpenAI,
    ant: anthropic.Anthropic,
    upstream: ScriptedUpstream,
) -> list[bytes]:
    send, replies = CASES[case]
    upstream.reset()
    upstream.queue(*replies)
    send(oai, ant, text)
    return [r.raw for r in upstream.wait_for_requests(len(replies))]


@pytest.mark.parametrize("case", list(CASES))
def test_a_large_body_goes_as_a_small_ones_would(
    case: str, oai: openai.OpenAI, ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    small = _sent(case, "hi", oai, ant, upstream)
    large = _sent(case, "hi" + PAD, oai, ant, upstream)
    assert len(large) == len(small)
    for got, want in zip(large, small, strict=True):
        assert len(got) > 6000
        # orjson's own compact encoding of what arrived, in its order: no seam shows
        assert got == orjson.dumps(orjson.loads(got))
        # and, the padding aside, what the small body's path sent
        assert orjson.loads(got.replace(PAD.encode(), b"")) == orjson.loads(want)
        assert list(orjson.loads(got)) == list(orjson.loads(want))
