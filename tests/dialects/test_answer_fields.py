"""Answers keep the upstream's fields: chat ``logprobs``, ``service_tier`` and
``system_fingerprint``; Anthropic ``thinking`` / ``redacted_thinking`` blocks with their
signatures; Responses ``reasoning`` items with ``summary`` and ``encrypted_content`` (and
their stream events). Same wire, they come back as sent; across wires what has an
equivalent is mapped (logprobs and ``service_tier`` between the two OpenAI APIs) and the
rest is dropped. Every body and stream event is validated against the SDK's types."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.dialect_clients import DIALECTS, Dialect, ask, strict_output
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import (
    Call,
    Raw,
    RawStream,
    ReasoningItem,
    Reply,
    ScriptedUpstream,
    Thinking,
    sse,
    token_logprobs,
)
from tests.support.three_wires import start_three_wire_gateway

ANSWER = '{"answer": "forty-two"}'
THOUGHTS = (
    Thinking("Let me think about this carefully.", signature="EqQBCgIYAhIM"),
    Thinking("c2VhbGVk", redacted=True),
)
REASONING = (
    ReasoningItem(
        "rs_up_1", ("Weighing the options.", "Picked one."), encrypted_content="gAAAAB-sealed"
    ),
)
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order": {"type": "string", "pattern": "^[0-9]+$"}},
    "required": ["order"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_three_wire_gateway(
        scripted_upstream_server, tmp_path_factory.mktemp("answer-fields")
    )
    yield gw
    gw.stop()


def queue(upstream: ScriptedUpstream, stream: bool, step: Reply) -> None:
    upstream.queue(*[step] * (2 if stream else 1))


def tokens_of(logprobs: Any) -> list[dict[str, Any]]:
    return [t.model_dump(exclude_none=True) for t in logprobs]


# -- chat completions, chat wire ---------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_keeps_logprobs_tier_and_fingerprint(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool, strict: bool
) -> None:
    queue(
        upstream,
        stream,
        Reply(
            content=ANSWER,
            logprobs=True,
            service_tier="priority",
            system_fingerprint="fp_44709d6fcb",
            fragment=6,
        ),
    )
    seen = ask(
        gw,
        "chat",
        "oa",
        stream=stream,
        extra={
            "logprobs": True,
            **(strict_output("chat") if strict else {}),
        },
    )
    final = seen.final
    assert final.choices[0].message.content == ANSWER
    assert final.service_tier == "priority" and final.system_fingerprint == "fp_44709d6fcb"
    tokens = final.choices[0].logprobs.content
    if not stream:
        assert tokens_of(tokens) == token_logprobs(ANSWER, 6)
        assert seen.raw["choices"][0]["logprobs"]["content"] == token_logprobs(ANSWER, 6)
        return
    assert "".join(t.token for t in tokens) == ANSWER
    if not strict:  # each fragment's tokens in its own chunk, as sent
        scored = [c for c in seen.events if c["choices"] and c["choices"][0]["logprobs"]]
        assert [c["choices"][0]["logprobs"]["content"] for c in scored] == [
            token_logprobs(p, 6) for p in [ANSWER[i : i + 6] for i in range(0, len(ANSWER), 6)]
        ]
    assert {(c["service_tier"], c["system_fingerprint"]) for c in seen.events} == {
        ("priority", "fp_44709d6fcb")
    }


def test_chat_keeps_a_refusals_logprobs(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    lp = token_logprobs("No.", 8)
    body = {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1,
        "model": "x",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": "No.",
                    "reasoning_content": "the user asks for harm",
                    "annotations": [],
                },
                "logprobs": {"content": None, "refusal": lp},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    upstream.queue(Raw(json.dumps(body).encode()))
    seen = ask(gw, "chat", "oa", stream=False, extra=strict_output("chat"))
    choice = seen.raw["choices"][0]
    assert choice["logprobs"] == {"content": None, "refusal": lp}
    # Members of the message the gateway does not read ride along on the same wire.
    assert choice["message"]["reasoning_content"] == "the user asks for harm"
    assert choice["message"]["annotations"] == []
    assert len(upstream.requests) == 1


def test_chat_stream_passes_unknown_delta_members_through(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "x",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    events = [
        chunk({"role": "assistant"}),
        chunk({"reasoning_content": "Hmm."}),
        chunk({"content": "Hi"}),
        chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]
    upstream.queue(RawStream(events), RawStream(events))
    seen = ask(gw, "chat", "oa", stream=True)
    deltas = [c["choices"][0]["delta"] for c in seen.events if c["choices"]]
    assert {"reasoning_content": "Hmm."} in deltas
    assert seen.final.choices[0].message.content == "Hi"


# -- Messages, Anthropic wire -------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_messages_keep_thinking_blocks_and_signatures(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    queue(upstream, stream, Reply(content="Forty-two.", thinking=THOUGHTS, fragment=7))
    seen = ask(gw, "messages", "an", stream=stream)
    content = [b.model_dump(exclude_none=True) for b in seen.final.content]
    assert content[:2] == [
        {"type": "thinking", "thinking": THOUGHTS[0].text, "signature": "EqQBCgIYAhIM"},
        {"type": "redacted_thinking", "data": "c2VhbGVk"},
    ]
    assert (content[2]["type"], content[2]["text"]) == ("text", "Forty-two.")
    if stream:
        starts = [e for e in seen.events if e["type"] == "content_block_start"]
        assert [(e["index"], e["content_block"]["type"]) for e in starts] == [
            (0, "thinking"),
            (1, "redacted_thinking"),
            (2, "text"),
        ]
        deltas = [
            e["delta"]
            for e in seen.events
            if e["type"] == "content_block_delta" and e["index"] == 0
        ]
        assert "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta") == (
            THOUGHTS[0].text
        )
        assert deltas[-1] == {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_thinking_stays_before_a_corrected_tool_call(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    bad = Reply(tool_calls=[Call("lookup", '{"order": "A1"}', id="toolu_1")], thinking=THOUGHTS[:1])
    good = Reply(tool_calls=[Call("lookup", '{"order": "41"}', id="toolu_2")])
    for _ in range(2 if stream else 1):
        upstream.queue(bad, good)
    seen = ask(
        gw,
        "messages",
        "an",
        stream=stream,
        extra={"tools": [{"name": "lookup", "input_schema": TOOL_SCHEMA, "strict": True}]},
    )
    kinds = [
        (b.type, getattr(b, "signature", None), getattr(b, "input", None))
        for b in seen.final.content
    ]
    assert kinds == [("thinking", "EqQBCgIYAhIM", None), ("tool_use", None, {"order": "41"})]
    assert seen.final.content[1].id == "toolu_1"  # the corrected call keeps its id


# -- Responses, Responses wire ------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_keep_reasoning_items(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    queue(
        upstream,
        stream,
        Reply(content="Forty-two.", reasoning=REASONING, service_tier="flex", fragment=5),
    )
    seen = ask(gw, "responses", "rs", stream=stream)
    final = seen.final
    reasoning, message = final.output
    assert reasoning.model_dump(exclude_none=True) == {
        "type": "reasoning",
        "id": "rs_up_1",
        "encrypted_content": "gAAAAB-sealed",
        "summary": [
            {"type": "summary_text", "text": "Weighing the options."},
            {"type": "summary_text", "text": "Picked one."},
        ],
    }
    assert message.type == "message" and final.output_text == "Forty-two."
    assert final.service_tier == "flex"
    if stream:
        kinds = [e["type"] for e in seen.events]
        assert kinds.count("response.reasoning_summary_part.added") == 2
        assert "response.reasoning_summary_text.delta" in kinds
        added = [e for e in seen.events if e["type"] == "response.output_item.added"]
        assert [(e["output_index"], e["item"]["type"]) for e in added] == [
            (0, "reasoning"),
            (1, "message"),
        ]
        summary = [e for e in seen.events if e["type"] == "response.reasoning_summary_text.delta"]
        assert {(e["item_id"], e["output_index"]) for e in summary} == {("rs_up_1", 0)}
        numbers = [e["sequence_number"] for e in seen.events]
        assert numbers == list(range(len(numbers)))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_reasoning_then_a_function_call_in_order(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    queue(
        upstream, stream, Reply(reasoning=REASONING, tool_calls=[Call("lookup", '{"order": "41"}')])
    )
    seen = ask(
        gw,
        "responses",
        "rs",
        stream=stream,
        extra={"tools": [{"type": "function", "name": "lookup", "parameters": TOOL_SCHEMA}]},
    )
    assert [item.type for item in seen.final.output] == ["reasoning", "function_call"]
    assert seen.final.output[0].encrypted_content == "gAAAAB-sealed"


# -- across wires --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_logprobs_and_tier_reach_a_responses_client(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    queue(
        upstream,
        stream,
        Reply(content="Forty-two.", logprobs=True, service_tier="priority", fragment=4),
    )
    seen = ask(gw, "responses", "oa", stream=stream)
    [message] = seen.final.output
    tokens = message.content[0].logprobs
    assert "".join(t.token for t in tokens) == "Forty-two."
    assert seen.final.service_tier == "priority"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", [d for d in DIALECTS if d != "messages"])
def test_thinking_is_dropped_outside_messages(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    queue(upstream, stream, Reply(content="Forty-two.", thinking=THOUGHTS))
    seen = ask(gw, dialect, "an", stream=stream)
    if dialect == "chat":
        assert seen.final.choices[0].message.content == "Forty-two."
    else:
        assert [item.type for item in seen.final.output] == ["message"]
    # named, when the headers are still to be sent
    assert seen.headers.get("x-syntic-dropped", "") == (
        "" if stream else "content[].thinking,content[].redacted_thinking"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", [d for d in DIALECTS if d != "responses"])
def test_reasoning_items_are_dropped_outside_responses(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    queue(upstream, stream, Reply(content="Forty-two.", reasoning=REASONING))
    seen = ask(gw, dialect, "rs", stream=stream)
    if dialect == "chat":
        assert seen.final.choices[0].message.content == "Forty-two."
    else:
        assert [b.type for b in seen.final.content] == ["text"]
    assert seen.headers.get("x-syntic-dropped", "") == ("" if stream else "output[].reasoning")


REFUSED: dict[str, Any] = {
    "id": "msg_up",
    "type": "message",
    "role": "assistant",
    "model": "up",
    "content": [{"type": "text", "text": "I can't help with that."}],
    "stop_reason": "refusal",
    "stop_sequence": None,
    "stop_details": {
        "type": "refusal",
        "category": "cyber",
        "explanation": "This request asks for malware.",
    },
    "usage": {"input_tokens": 10, "output_tokens": 5},
}


def refused_stream() -> RawStream:
    def event(name: str, **data: Any) -> bytes:
        return sse({"type": name, **data}, event=name)

    start = {**REFUSED, "content": [], "stop_reason": None, "stop_details": None}
    return RawStream(
        [
            event("message_start", message=start),
            event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            event(
                "content_block_delta",
                index=0,
                delta={"type": "text_delta", "text": "I can't help with that."},
            ),
            event("content_block_stop", index=0),
            event(
                "message_delta",
                delta={
                    "stop_reason": "refusal",
                    "stop_sequence": None,
                    "stop_details": REFUSED["stop_details"],
                },
                usage={"output_tokens": 5},
            ),
            event("message_stop"),
        ]
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_refusals_stop_details_reach_a_messages_client(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    upstream.queue(
        *([refused_stream(), refused_stream()] if stream else [Raw(json.dumps(REFUSED).encode())])
    )
    seen = ask(gw, "messages", "an", stream=stream)
    assert seen.final.stop_reason == "refusal"
    assert seen.final.stop_details.model_dump() == REFUSED["stop_details"]
    if stream:
        [delta] = [e for e in seen.events if e["type"] == "message_delta"]
        assert delta["delta"]["stop_details"] == REFUSED["stop_details"]
    else:
        assert seen.raw["stop_details"] == REFUSED["stop_details"]


def test_a_refusals_stop_details_are_named_for_another_wire(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Raw(json.dumps(REFUSED).encode()))
    seen = ask(gw, "chat", "an", stream=False)
    assert seen.final.choices[0].message.refusal == "I can't help with that."
    assert seen.headers["x-syntic-dropped"] == "stop_details"


def test_an_upstream_event_name_never_reaches_the_clients_event_line(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """Only the reasoning events the gateway knows by name pass through: an upstream's
    ``type`` with a line break in it would otherwise write an event of its own."""
    evil = "response.reasoning_summary_text.delta\nevent: error"

    def event(kind: str, **data: Any) -> bytes:
        return b"data: " + json.dumps({"type": kind, **data}).encode() + b"\n\n"

    response = {
        "id": "resp_up",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "x",
        "output": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    item = {"type": "reasoning", "id": "rs_1", "summary": []}
    message = {
        "type": "message",
        "id": "m",
        "role": "assistant",
        "status": "completed",
        "content": [],
    }
    events = [
        event("response.created", response={**response, "status": "in_progress"}),
        event("response.output_item.added", output_index=0, item=item),
        event(evil, item_id="rs_1", output_index=0, summary_index=0, delta="x"),
        event("response.output_item.done", output_index=0, item=item),
        event("response.output_item.added", output_index=1, item=message),
        event(
            "response.output_text.delta", item_id="m", output_index=1, content_index=0, delta="Hi"
        ),
        event("response.completed", response=response),
    ]
    upstream.queue(RawStream(events), RawStream(events))
    seen = ask(gw, "responses", "rs", stream=True)
    assert "error" not in [e["type"] for e in seen.events]
    assert [item.type for item in seen.final.output] == ["reasoning", "message"]


# -- the upstream's other usage members --------------------------------------------------

AN_USAGE: dict[str, Any] = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_creation_input_tokens": 3,
    "cache_read_input_tokens": 2,
    "service_tier": "standard",
    "inference_geo": "us",
    "cache_creation": {"ephemeral_5m_input_tokens": 1, "ephemeral_1h_input_tokens": 2},
    "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
}
STRICT_TOOL: dict[str, Any] = {"name": "lookup", "input_schema": TOOL_SCHEMA, "strict": True}


def an_answer(content: list[dict[str, Any]], stop: str = "end_turn") -> Raw:
    return Raw(
        json.dumps(
            {
                "id": "msg_up",
                "type": "message",
                "role": "assistant",
                "model": "up",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": AN_USAGE,
            }
        ).encode()
    )


def an_usage_stream() -> RawStream:
    def event(name: str, **data: Any) -> bytes:
        return sse({"type": name, **data}, event=name)

    return RawStream(
        [
            event(
                "message_start",
                message={
                    "id": "msg_up",
                    "type": "message",
                    "role": "assistant",
                    "model": "up",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**AN_USAGE, "output_tokens": 1},
                },
            ),
            event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi."}),
            event("content_block_stop", index=0),
            event(
                "message_delta",
                delta={"stop_reason": "end_turn", "stop_sequence": None},
                usage={"output_tokens": 5, "server_tool_use": AN_USAGE["server_tool_use"]},
            ),
            event("message_stop"),
        ]
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_usage_members_reach_a_messages_client(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    text = [{"type": "text", "text": "Hi."}]
    upstream.queue(*([an_usage_stream(), an_usage_stream()] if stream else [an_answer(text)]))
    seen = ask(gw, "messages", "an", stream=stream)
    usage = seen.final.usage
    assert usage.server_tool_use.web_search_requests == 1
    assert (
        usage.input_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
        usage.output_tokens,
    ) == (10, 3, 2, 5)
    if not stream:
        assert seen.raw["usage"] == {**AN_USAGE, "schema_retries": 0}
        assert usage.cache_creation.ephemeral_1h_input_tokens == 2
        return
    [delta] = [e for e in seen.events if e["type"] == "message_delta"]
    assert delta["usage"] == {**AN_USAGE, "schema_retries": 0}


def test_a_corrections_usage_members_are_added_to_the_first_calls(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "lookup"}
    upstream.queue(
        an_answer([{**call, "input": {"order": "A1"}}], "tool_use"),
        an_answer([{**call, "input": {"order": "41"}}], "tool_use"),
    )
    seen = ask(gw, "messages", "an", stream=False, extra={"tools": [STRICT_TOOL]})
    assert seen.final.content[0].input == {"order": "41"}
    usage = seen.raw["usage"]
    assert usage["server_tool_use"] == {"web_search_requests": 2, "web_fetch_requests": 0}
    assert usage["cache_creation"] == {
        "ephemeral_5m_input_tokens": 2,
        "ephemeral_1h_input_tokens": 4,
    }
    assert (usage["service_tier"], usage["schema_retries"]) == ("standard", 1)
    assert usage["input_tokens"] == 20


def test_anthropic_usage_members_are_named_for_another_wire(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(an_answer([{"type": "text", "text": "Hi."}]))
    seen = ask(gw, "chat", "an", stream=False)
    assert seen.final.usage.prompt_tokens == 15
    assert seen.headers["x-syntic-dropped"].split(",") == [
        "usage.service_tier",
        "usage.inference_geo",
        "usage.cache_creation",
        "usage.server_tool_use",
    ]


def test_chat_usage_and_answer_members_come_back_as_sent(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 2, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 1,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 3,
            "rejected_prediction_tokens": 1,
        },
    }
    moderation = {
        "input": {"type": "moderation_results", "model": "omni-moderation", "results": []},
        "output": {"type": "moderation_results", "model": "omni-moderation", "results": []},
    }
    upstream.queue(
        Raw(
            json.dumps(
                {
                    "id": "chatcmpl-up",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "up",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "logprobs": None,
                            "message": {"role": "assistant", "content": "Hi.", "refusal": None},
                        }
                    ],
                    "usage": usage,
                    "moderation": moderation,
                    "service_tier": "default",
                }
            ).encode()
        )
    )
    seen = ask(gw, "chat", "oa", stream=False)
    assert seen.raw["usage"] == {**usage, "schema_retries": 0}
    assert seen.raw["moderation"] == moderation and seen.raw["service_tier"] == "default"
    assert seen.final.usage.completion_tokens_details.accepted_prediction_tokens == 3
