"""Citations in an answer's text, and a call's or a message's own members: Anthropic text
blocks' ``citations`` (streamed as ``citations_delta``), Responses
``output_text.annotations`` (streamed as ``response.output_text.annotation.added``), chat
``message.annotations``; an Anthropic ``tool_use`` block's ``caller``, a Responses
``function_call``'s ``caller`` and a Responses message's ``phase``.
Same wire they come back as sent, streamed and not; across wires a web citation becomes
the other wire's ``url_citation`` where it has one, and the rest is named in
``x-syntic-dropped``. Every body and stream event is validated against the SDK's types
(``dialect_clients.ask``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.types import Message

from tests.support.dialect_clients import Dialect, ask
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import (
    Raw,
    RawStream,
    ScriptedUpstream,
    sse,
    token_logprobs,
)
from tests.support.three_wires import start_three_wire_gateway

TEXTS = ["Order 41 ", "shipped on Monday", ", and order 7 ", "is due."]
TEXT = "".join(TEXTS)
URL, TITLE = "https://shop.example/41", "Order 41"
WEB: dict[str, Any] = {
    "type": "web_search_result_location",
    "url": URL,
    "title": TITLE,
    "cited_text": "Shipped Monday",
    "encrypted_index": "Eo8BCioI",
}
CHAR: dict[str, Any] = {
    "type": "char_location",
    "cited_text": "order 7",
    "document_index": 0,
    "document_title": "Ledger",
    "start_char_index": 0,
    "end_char_index": 7,
    "file_id": None,
}
CALLER: dict[str, Any] = {"type": "direct"}
ARGS = '{"order": "41"}'
USAGE_AN = {"input_tokens": 10, "output_tokens": 5}

# -- an Anthropic upstream's answer ----------------------------------------------------

AN_CONTENT: list[dict[str, Any]] = [
    {"type": "text", "text": TEXTS[0]},
    {"type": "text", "text": TEXTS[1], "citations": [WEB]},
    {"type": "text", "text": TEXTS[2], "citations": [CHAR]},
    {"type": "text", "text": TEXTS[3]},
    {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup",
        "input": json.loads(ARGS),
        "caller": CALLER,
    },
]


def an_body() -> bytes:
    return json.dumps(
        {
            "id": "msg_up",
            "type": "message",
            "role": "assistant",
            "model": "up",
            "content": AN_CONTENT,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": USAGE_AN,
        }
    ).encode()


def an_stream() -> RawStream:
    def event(name: str, **data: Any) -> bytes:
        return sse({"type": name, **data}, event=name)

    out = [
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
                "usage": USAGE_AN,
            },
        )
    ]
    for i, block in enumerate(AN_CONTENT):
        if block["type"] == "tool_use":
            out.append(event("content_block_start", index=i, content_block={**block, "input": {}}))
            out.append(
                event(
                    "content_block_delta",
                    index=i,
                    delta={"type": "input_json_delta", "partial_json": ARGS},
                )
            )
        else:
            start: dict[str, Any] = {"type": "text", "text": ""}
            if "citations" in block:
                start["citations"] = []
            out.append(event("content_block_start", index=i, content_block=start))
            for citation in block.get("citations", ()):
                out.append(
                    event(
                        "content_block_delta",
                        index=i,
                        delta={"type": "citations_delta", "citation": citation},
                    )
                )
            out.append(
                event(
                    "content_block_delta",
                    index=i,
                    delta={"type": "text_delta", "text": block["text"]},
                )
            )
        out.append(event("content_block_stop", index=i))
    out.append(
        event(
            "message_delta",
            delta={"stop_reason": "tool_use", "stop_sequence": None},
            usage={"output_tokens": 5},
        )
    )
    out.append(event("message_stop"))
    return RawStream(out)


# -- a Responses upstream's answer -----------------------------------------------------

RS_URL: dict[str, Any] = {
    "type": "url_citation",
    "start_index": 9,
    "end_index": 26,
    "url": URL,
    "title": TITLE,
}
RS_FILE: dict[str, Any] = {
    "type": "file_citation",
    "file_id": "file_1",
    "filename": "ledger.pdf",
    "index": 40,
}
RS_CALL: dict[str, Any] = {
    "type": "function_call",
    "id": "fc_up",
    "call_id": "call_1",
    "name": "lookup",
    "arguments": ARGS,
    "status": "completed",
    "caller": CALLER,
}
USAGE_RS = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
TOKENS = token_logprobs(TEXT, 16)


def rs_message(notes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_up",
        "role": "assistant",
        "status": "completed",
        "phase": "final_answer",
        "content": [
            {"type": "output_text", "text": TEXT, "annotations": notes, "logprobs": TOKENS}
        ],
    }


def rs_response() -> dict[str, Any]:
    return {
        "id": "resp_up",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "up",
        "output": [rs_message([RS_URL, RS_FILE]), RS_CALL],
        "usage": USAGE_RS,
        **RS_ECHO,
    }


# What a Responses upstream says of the request beside its answer.
RS_ECHO: dict[str, Any] = {
    "service_tier": "default",
    "reasoning": {"effort": "low", "summary": "auto"},
    "truncation": "auto",
    "prompt_cache_key": "pck-1",
}


def rs_body() -> bytes:
    return json.dumps(rs_response()).encode()


def rs_stream() -> RawStream:
    seq = iter(range(1000))

    def event(name: str, **data: Any) -> bytes:
        return sse({"type": name, "sequence_number": next(seq), **data}, event=name)

    empty = rs_message([])
    empty["content"][0]["logprobs"] = []
    where = {"item_id": "msg_up", "output_index": 0, "content_index": 0}
    return RawStream(
        [
            event(
                "response.created",
                response={**rs_response(), "status": "in_progress", "output": []},
            ),
            event(
                "response.output_item.added",
                output_index=0,
                item={**empty, "status": "in_progress", "content": []},
            ),
            event(
                "response.content_part.added",
                **where,
                part={"type": "output_text", "text": "", "annotations": []},
            ),
            event("response.output_text.delta", **where, delta=TEXT, logprobs=TOKENS),
            *[
                event(
                    "response.output_text.annotation.added",
                    **where,
                    annotation_index=i,
                    annotation=note,
                )
                for i, note in enumerate([RS_URL, RS_FILE])
            ],
            event("response.output_text.done", **where, text=TEXT, logprobs=TOKENS),
            event("response.output_item.done", output_index=0, item=rs_message([RS_URL, RS_FILE])),
            event(
                "response.output_item.added",
                output_index=1,
                item={**RS_CALL, "arguments": "", "status": "in_progress"},
            ),
            event(
                "response.function_call_arguments.delta",
                item_id="fc_up",
                output_index=1,
                delta=ARGS,
            ),
            event(
                "response.function_call_arguments.done",
                item_id="fc_up",
                output_index=1,
                arguments=ARGS,
            ),
            event("response.output_item.done", output_index=1, item=RS_CALL),
            event("response.completed", response=rs_response()),
        ]
    )


# -- a chat upstream's answer ----------------------------------------------------------

CHAT_URL: dict[str, Any] = {
    "type": "url_citation",
    "url_citation": {"start_index": 9, "end_index": 26, "url": URL, "title": TITLE},
}


def chat_body() -> bytes:
    return json.dumps(
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
                    "message": {
                        "role": "assistant",
                        "content": TEXT,
                        "refusal": None,
                        "annotations": [CHAT_URL],
                    },
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    ).encode()


def chat_stream() -> RawStream:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(
            {
                "id": "chatcmpl-up",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "up",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    return RawStream(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": TEXT}),
            chunk({"annotations": [CHAT_URL]}),
            chunk({}, "stop"),
            sse(
                {
                    "id": "chatcmpl-up",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "up",
                    "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
            ),
            b"data: [DONE]\n\n",
        ]
    )


# -- the gateway -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_three_wire_gateway(
        scripted_upstream_server, tmp_path_factory.mktemp("answer-citations")
    )
    yield gw
    gw.stop()


ANSWERS = {"an": (an_body, an_stream), "rs": (rs_body, rs_stream), "oa": (chat_body, chat_stream)}


def answered(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str, dialect: Dialect, stream: bool
) -> Any:
    body, streamed = ANSWERS[model]
    upstream.queue(*([streamed(), streamed()] if stream else [Raw(body())]))
    return ask(gw, dialect, model, stream=stream)


def dropped(seen: Any) -> list[str]:
    value: str = seen.headers.get("x-syntic-dropped", "")
    return value.split(",") if value else []


def chat_annotations(seen: Any) -> list[dict[str, Any]]:
    return [a.model_dump() for a in seen.final.choices[0].message.annotations or ()]


# -- same wire -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_citations_and_caller_come_back_as_sent(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    seen = answered(gw, upstream, "an", "messages", stream)
    sent = Message.model_validate_json(an_body())
    assert [b.model_dump() for b in seen.final.content] == [b.model_dump() for b in sent.content]
    if not stream:
        assert seen.raw["content"] == AN_CONTENT  # byte for byte
        return
    deltas = [
        (e["index"], e["delta"]["citation"])
        for e in seen.events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "citations_delta"
    ]
    assert deltas == [(1, WEB), (2, CHAR)]
    starts = [e["content_block"] for e in seen.events if e["type"] == "content_block_start"]
    assert starts[4] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup",
        "input": {},
        "caller": CALLER,
    }


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_annotations_and_caller_come_back_as_sent(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    seen = answered(gw, upstream, "rs", "responses", stream)
    output = seen.final.output
    assert [o.type for o in output] == ["message", "function_call"]
    assert [a.model_dump() for a in output[0].content[0].annotations] == [RS_URL, RS_FILE]
    assert output[1].caller.model_dump() == CALLER
    assert output[0].id != "msg_up"  # the message item is the gateway's own
    assert output[0].phase == "final_answer"  # its own members as sent
    assert [t.model_dump() for t in output[0].content[0].logprobs or ()] == TOKENS
    final = seen.final
    assert (final.service_tier, final.truncation, final.prompt_cache_key) == (
        "default",
        "auto",
        "pck-1",
    )
    assert final.reasoning.model_dump(exclude_none=True) == RS_ECHO["reasoning"]
    if not stream:
        assert seen.raw["output"][0]["content"][0]["annotations"] == [RS_URL, RS_FILE]
        assert seen.raw["output"][1]["caller"] == CALLER
        return
    added = [e for e in seen.events if e["type"] == "response.output_text.annotation.added"]
    assert [(e["annotation_index"], e["annotation"]) for e in added] == [(0, RS_URL), (1, RS_FILE)]
    [done] = [e for e in seen.events if e["type"] == "response.completed"]
    message = done["response"]["output"][0]
    assert {e["item_id"] for e in added} == {message["id"]}
    assert message["content"][0]["annotations"] == [RS_URL, RS_FILE]
    [part] = [e for e in seen.events if e["type"] == "response.content_part.done"]
    assert part["part"]["annotations"] == [RS_URL, RS_FILE]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_annotations_come_back_as_sent(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    seen = answered(gw, upstream, "oa", "chat", stream)
    if not stream:
        assert seen.raw["choices"][0]["message"]["annotations"] == [CHAT_URL]
        assert chat_annotations(seen) == [CHAT_URL]
        return
    assert [
        e["choices"][0]["delta"]["annotations"]
        for e in seen.events
        if e["choices"] and "annotations" in e["choices"][0]["delta"]
    ] == [[CHAT_URL]]


# -- across wires (streamed: the web citations only, since the headers went first) ------


def streamed_chat_annotations(seen: Any) -> list[dict[str, Any]]:
    return [
        a
        for e in seen.events
        if e["choices"]
        for a in e["choices"][0]["delta"].get("annotations", ())
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_anthropic_web_citation_is_a_url_citation_for_the_openai_dialects(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    # a stream's headers went out before its citations came: only the body is named
    names = [] if stream else ["content[].citations[].char_location", "content[].tool_use.caller"]
    chat = answered(gw, upstream, "an", "chat", stream)
    assert chat.final.choices[0].message.content == TEXT
    if stream:
        assert streamed_chat_annotations(chat) == [CHAT_URL]
    else:
        assert chat_annotations(chat) == [CHAT_URL]
    assert dropped(chat) == names
    responses = answered(gw, upstream, "an", "responses", stream)
    [message, call] = responses.final.output
    assert message.content[0].text == TEXT
    assert [a.model_dump() for a in message.content[0].annotations] == [RS_URL]
    assert call.caller is None
    assert dropped(responses) == names


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_and_chat_citations_across_the_openai_wires(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    chat = answered(gw, upstream, "rs", "chat", stream)
    if stream:
        assert streamed_chat_annotations(chat) == [CHAT_URL]
    else:
        assert chat_annotations(chat) == [CHAT_URL]
        assert dropped(chat) == [
            "output[].content[].annotations[].file_citation",
            "output[].function_call.caller",
            "output[].message.phase",
        ]
    responses = answered(gw, upstream, "oa", "responses", stream)
    [message] = responses.final.output
    assert [a.model_dump() for a in message.content[0].annotations] == [RS_URL]
    assert dropped(responses) == []


@pytest.mark.parametrize(
    ("model", "names"),
    [
        (
            "rs",
            [
                "output[].content[].annotations[].url_citation",
                "output[].content[].annotations[].file_citation",
                "output[].function_call.caller",
                "logprobs",
                "service_tier",
                "output[].message.phase",
            ],
        ),
        ("oa", ["message.annotations[].url_citation"]),
    ],
)
def test_an_openai_citation_is_named_for_a_messages_client(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str, names: list[str]
) -> None:
    seen = answered(gw, upstream, model, "messages", False)
    text = [b for b in seen.raw["content"] if b["type"] == "text"]
    assert "".join(b["text"] for b in text) == TEXT
    assert all("citations" not in b for b in text)  # Anthropic's need an encrypted index
    assert dropped(seen) == names
