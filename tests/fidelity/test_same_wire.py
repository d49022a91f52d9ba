"""Same wire, same bytes: a client on the upstream's own wire gets its own body to the
upstream (what the SDK put on the wire, as the upstream recorded it), with only what the
gateway owns replaced, and its vendor headers."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai

from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"],
    "additionalProperties": False,
}


def _sent(content: bytes) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(content)
    return body


def test_messages_to_anthropic_keeps_every_field_and_header(
    ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """Claude Code's shape: cache_control everywhere, system blocks, a system message among
    ``messages``, thinking, a tool_reference in a tool result, a deferred tool."""
    upstream.queue(Reply(content="Done."))
    cache = {"type": "ephemeral"}
    raw = ant.messages.with_raw_response.create(  # type: ignore[call-overload]
        model="msg-up",
        max_tokens=2048,
        system=[{"type": "text", "text": "You are terse.", "cache_control": cache}],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Find the weather tool.", "cache_control": cache}
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should search.", "signature": "sig"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "tool_search",
                        "input": {"query": "weather"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "tool_reference", "tool_name": "get_weather"}],
                    }
                ],
            },
        ],
        tools=[
            {
                "name": "tool_search",
                "description": "Search tools",
                "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
                "cache_control": cache,
            },
            {"name": "get_weather", "input_schema": TOOL_SCHEMA, "defer_loading": True},
        ],
        thinking={"type": "enabled", "budget_tokens": 1024},
        output_config={"effort": "high"},
        service_tier="auto",
        inference_geo="us",
        extra_body={
            "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
            "mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "ex"}],
            "frobnicate": {"anything": [1, 2]},
            "messages_extra": None,
        },
        extra_headers={"anthropic-beta": "context-management-2025-06-27,mcp-client-2025-04-04"},
    )
    assert raw.parse().content[0].type == "text"
    sent = _sent(raw.http_request.content)
    [got] = upstream.requests
    assert got.body == {**sent, "model": "msg-up-served"}
    assert got.headers["anthropic-beta"] == raw.http_request.headers["anthropic-beta"]
    assert got.headers["anthropic-version"] == raw.http_request.headers["anthropic-version"]
    assert "x-syntic-dropped" not in raw.headers


def test_messages_system_message_inside_messages_goes_verbatim(
    ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="ok"))
    raw = ant.messages.with_raw_response.create(
        model="msg-up",
        max_tokens=64,
        messages=[{"role": "user", "content": "hi"}],
        extra_body={
            "messages": [
                {"role": "system", "content": "Mode: plan."},
                {"role": "user", "content": "hi"},
            ]
        },
    )
    assert raw.status_code == 200
    assert upstream.requests[0].body["messages"][0] == {"role": "system", "content": "Mode: plan."}


def test_chat_to_chat_keeps_every_field(oai: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="Hi."))
    raw = oai.chat.completions.with_raw_response.create(
        model="chat-up",
        messages=[
            {"role": "developer", "content": "Be brief.", "name": "ops"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://x.test/a.png", "detail": "low"},
                    },
                ],
            },
        ],
        max_tokens=100,
        prompt_cache_key="tenant-7",
        prompt_cache_retention="24h",
        safety_identifier="user-hash",
        verbosity="low",
        reasoning_effort="minimal",
        service_tier="flex",
        seed=7,
        logit_bias={"50256": -100},
        metadata={"trace": "t1"},
        store=True,
        tools=[
            {"type": "function", "function": {"name": "get_weather", "parameters": TOOL_SCHEMA}}
        ],
        extra_body={"frobnicate": True, "functions_v2": [1]},
    )
    assert raw.parse().choices[0].message.content == "Hi."
    sent = _sent(raw.http_request.content)
    [got] = upstream.requests
    assert got.body == {**sent, "model": "chat-up-served"}


def test_responses_to_responses_keeps_codex_fields(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """Codex's shape: a namespace tool, hosted web_search, reasoning.summary,
    prompt_cache_key, client_metadata, include, a reasoning item replayed."""
    upstream.queue(Reply(content="Patched."))
    namespace = {
        "type": "namespace",
        "name": "repo",
        "description": "Repository tools",
        "tools": [
            {
                "type": "function",
                "name": "read_file",
                "strict": False,
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
        ],
    }
    raw = oai.responses.with_raw_response.create(  # type: ignore[call-overload]
        model="resp-up",
        instructions="You are Codex.",
        input=[
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Fix the bug."},
                    {"type": "input_image", "image_url": "https://x.test/s.png", "detail": "high"},
                ],
            },
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
        ],
        tools=[namespace, {"type": "web_search"}],
        tool_choice="auto",
        reasoning={"effort": "high", "summary": "auto"},
        text={"verbosity": "low"},
        include=["reasoning.encrypted_content"],
        prompt_cache_key="thread-42",
        truncation="auto",
        top_logprobs=2,
        store=False,
        extra_body={"client_metadata": {"session": "s1"}, "frobnicate": 1},
    )
    assert raw.parse().output_text == "Patched."
    sent = _sent(raw.http_request.content)
    [got] = upstream.requests
    assert got.body == {**sent, "model": "resp-up-served"}


def test_owned_fields_are_replaced_and_only_they(
    oai: openai.OpenAI, ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """A strict tool to an upstream that does not enforce: ``strict`` stripped; the
    default ``store`` of a Responses request: ``store: false`` upstream; a chat stream:
    ``include_usage``; ``n``: one call per choice."""
    upstream.responder = lambda request: Reply(content="ok")
    strict_tool: Any = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": TOOL_SCHEMA, "strict": True},
    }
    raw = oai.chat.completions.with_raw_response.create(
        model="chat-up",
        messages=[{"role": "user", "content": "hi"}],
        tools=[strict_tool],
        n=2,
        prompt_cache_key="k",
    )
    sent = _sent(raw.http_request.content)
    first, second = upstream.requests
    assert first.body == second.body
    unstrict = {"type": "function", "function": {"name": "get_weather", "parameters": TOOL_SCHEMA}}
    expected = {k: v for k, v in sent.items() if k != "n"}
    assert first.body == {**expected, "model": "chat-up-served", "tools": [unstrict]}

    upstream.reset()
    upstream.responder = lambda request: Reply(content="ok")
    with oai.chat.completions.create(
        model="chat-up",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": False},
        prompt_cache_key="k",
    ) as stream:
        for _ in stream:
            pass
    body = upstream.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["prompt_cache_key"] == "k"

    upstream.reset()
    upstream.responder = lambda request: Reply(content="ok")
    raw_r = oai.responses.with_raw_response.create(
        model="resp-up", input="hi", prompt_cache_key="k"
    )
    sent_r = _sent(raw_r.http_request.content)
    assert upstream.requests[0].body == {**sent_r, "model": "resp-up-served", "store": False}


def test_a_correction_appends_its_turns_to_the_clients_body(
    ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("get_weather", '{"city": 3}', id="toolu_bad")]),
        Reply(tool_calls=[Call("get_weather", '{"city": "Oslo"}')]),
    )
    cache = {"type": "ephemeral"}
    raw = ant.messages.with_raw_response.create(  # type: ignore[call-overload]
        model="msg-up",
        max_tokens=2048,
        system=[{"type": "text", "text": "Use tools.", "cache_control": cache}],
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=[
            {
                "name": "get_weather",
                "input_schema": TOOL_SCHEMA,
                "strict": True,
                "cache_control": cache,
            }
        ],
        thinking={"type": "enabled", "budget_tokens": 1024},
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )
    [block] = raw.parse().content
    assert block.type == "tool_use" and block.input == {"city": "Oslo"}
    sent = _sent(raw.http_request.content)
    first, fix = (r.body for r in upstream.requests)
    unstrict_tools = [{"name": "get_weather", "input_schema": TOOL_SCHEMA, "cache_control": cache}]
    assert first == {**sent, "model": "msg-up-served", "tools": unstrict_tools}
    # the correction: the client's body, its turns after the client's, the tool forced,
    # thinking off (the API refuses a forced tool choice with thinking on)
    assert fix["system"] == sent["system"] and fix["tools"] == unstrict_tools
    assert fix["messages"][0] == sent["messages"][0]
    assert [m["role"] for m in fix["messages"]] == ["user", "assistant", "user"]
    assert fix["messages"][1]["content"][0]["id"] == "toolu_bad"
    assert fix["messages"][2]["content"][0]["type"] == "tool_result"
    assert fix["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert fix["thinking"] == {"type": "disabled"}
    assert upstream.requests[1].headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"


def test_a_replaced_tool_keeps_the_clients_key_order_its_changed_keys_last(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """The fields the gateway owns go after the client's own, in a fixed order; the
    rest keep the client's order."""
    upstream.queue(Reply(content="ok"))
    strict_tool: Any = {
        "function": {
            "parameters": TOOL_SCHEMA,
            "strict": True,
            "name": "get_weather",
            "description": "Weather.",
        },
        "type": "function",
    }
    oai.chat.completions.create(
        model="chat-up", messages=[{"role": "user", "content": "hi"}], tools=[strict_tool]
    )
    [got] = upstream.requests
    [tool] = got.body["tools"]
    assert list(tool) == ["function", "type"]
    assert list(tool["function"]) == ["name", "description", "parameters"]
