"""Cross-wire translations, through the official SDKs: each field reaches another wire's
upstream as that wire's equivalent, or is dropped with notice, or refused, as the field
policy says; and what a same-wire client's vendor sends is judged by the vendor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from gateway.settings import ConfigError, load_settings
from tests.support.scripted_upstream import Call, HttpError, Reply, ScriptedUpstream

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
USER: Any = [{"role": "user", "content": "hi"}]


def _dropped(headers: Any) -> list[str]:
    value: str = headers.get("x-syntic-dropped", "")
    return value.split(",") if value else []


# -- token limits ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "field"),
    [("chat-up", "max_completion_tokens"), ("chat-legacy", "max_tokens")],
)
def test_a_token_limit_reaches_a_chat_upstream_in_its_field(
    ant: anthropic.Anthropic,
    oai: openai.OpenAI,
    upstream: ScriptedUpstream,
    model: str,
    field: str,
) -> None:
    upstream.responder = lambda request: Reply(content="ok")
    ant.messages.create(model=model, max_tokens=321, messages=USER)
    oai.responses.create(model=model, input="hi", max_output_tokens=123)
    first, second = (r.body for r in upstream.requests)
    other = "max_tokens" if field == "max_completion_tokens" else "max_completion_tokens"
    assert (first[field], second[field]) == (321, 123)
    assert other not in first and other not in second


def test_a_chat_clients_own_token_field_goes_as_sent(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="ok"))
    oai.chat.completions.create(model="chat-up", messages=USER, max_tokens=9)
    assert upstream.requests[0].body["max_tokens"] == 9


def test_max_tokens_to_responses_and_messages(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply(content="ok")
    oai.chat.completions.create(model="resp-up", messages=USER, max_completion_tokens=11)
    oai.chat.completions.create(model="msg-up", messages=USER, max_completion_tokens=12)
    responses, messages = (r.body for r in upstream.requests)
    assert responses["max_output_tokens"] == 11 and messages["max_tokens"] == 12


# -- system messages -------------------------------------------------------------------


def test_a_system_message_among_messages_is_folded_into_the_system_prompt(
    ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """Claude Code sends one; 400 before. Another wire gets it in the system prompt."""
    upstream.responder = lambda request: Reply(content="ok")
    turns: Any = [
        {"role": "user", "content": "first"},
        {"role": "system", "content": [{"type": "text", "text": "Plan mode."}]},
        {"role": "user", "content": "second"},
    ]
    for model in ("chat-up", "resp-up"):
        raw = ant.messages.with_raw_response.create(
            model=model,
            max_tokens=64,
            system="Be terse.",
            messages=USER,
            extra_body={"messages": turns},
        )
        assert raw.status_code == 200
    chat, responses = (r.body for r in upstream.requests)
    assert chat["messages"][0] == {"role": "system", "content": "Be terse.Plan mode."}
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "user"]
    assert responses["input"][0]["role"] == "system"
    assert [m.get("role") for m in responses["input"]] == ["system", "user", "user"]


# -- reasoning effort -----------------------------------------------------------------------


def test_reasoning_effort_translates_where_there_is_an_equivalent(
    oai: openai.OpenAI, ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply(content="ok")
    oai.chat.completions.create(model="msg-up", messages=USER, reasoning_effort="minimal")
    oai.chat.completions.create(model="resp-up", messages=USER, reasoning_effort="high")
    oai.responses.create(model="msg-up", input="hi", reasoning={"effort": "xhigh"})
    oai.responses.create(model="chat-up", input="hi", reasoning={"effort": "low"})
    ant.messages.create(
        model="chat-up", max_tokens=64, messages=USER, output_config={"effort": "max"}
    )
    ant.messages.create(
        model="resp-up", max_tokens=64, messages=USER, output_config={"effort": "medium"}
    )
    bodies = [r.body for r in upstream.requests]
    assert bodies[0]["output_config"] == {"effort": "low"}
    assert bodies[1]["reasoning"] == {"effort": "high"}
    assert bodies[2]["output_config"] == {"effort": "xhigh"}
    assert bodies[3]["reasoning_effort"] == "low"
    assert bodies[4]["reasoning_effort"] == "max"
    assert bodies[5]["reasoning"] == {"effort": "medium"}


def test_an_effort_without_equivalent_and_thinking_are_dropped_with_notice(
    oai: openai.OpenAI, ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply(content="ok")
    raw = oai.chat.completions.with_raw_response.create(
        model="msg-up", messages=USER, reasoning_effort="none"
    )
    assert _dropped(raw.headers) == ["reasoning_effort"]
    assert "output_config" not in upstream.requests[0].body
    raw_a = ant.messages.with_raw_response.create(
        model="chat-up",
        max_tokens=2048,
        messages=USER,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert _dropped(raw_a.headers) == ["thinking"]
    assert "reasoning_effort" not in upstream.requests[1].body


# -- images ------------------------------------------------------------------------------


def test_image_detail_is_kept_where_the_target_has_it(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply(content="ok")
    chat_image: Any = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}}
            ],
        }
    ]
    oai.chat.completions.create(model="resp-up", messages=chat_image)
    raw = oai.chat.completions.with_raw_response.create(model="msg-up", messages=chat_image)
    oai.responses.create(
        model="chat-up",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": "https://x.test/b.png", "detail": "high"}
                ],
            }
        ],
    )
    responses, messages, chat = (r.body for r in upstream.requests)
    assert responses["input"][0]["content"][0] == {
        "type": "input_image",
        "image_url": "https://x.test/a.png",
        "detail": "low",
    }
    assert "detail" not in str(messages["messages"])
    assert _dropped(raw.headers) == ["messages[].content[].image_url.detail"]
    assert chat["messages"][0]["content"][0]["image_url"] == {
        "url": "https://x.test/b.png",
        "detail": "high",
    }


# -- Claude Code -----------------------------------------------------------------------------


def test_claude_code_tool_reference_and_deferred_tools_cross_wire(
    ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="ok"))
    raw = ant.messages.with_raw_response.create(
        model="chat-up",
        max_tokens=64,
        messages=[
            {"role": "user", "content": "find it"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [
                            {"type": "text", "text": "found"},
                            {"type": "tool_reference", "tool_name": "read"},
                        ],
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
        tools=[
            {"name": "search", "input_schema": {"type": "object"}},
            {"name": "read", "input_schema": SCHEMA, "defer_loading": True},
        ],
    )
    assert raw.status_code == 200
    assert _dropped(raw.headers) == [
        "cache_control",
        "messages[].content[].content[].tool_reference",
        "tools[].defer_loading",
    ]
    body = upstream.requests[0].body
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "toolu_1", "content": "found"}
    assert [t["function"]["name"] for t in body["tools"]] == ["search", "read"]
    assert "defer_loading" not in str(body["tools"])


def test_an_anthropic_defined_tool_is_not_an_unknown_tool_on_the_same_wire(
    ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """A call to ``bash`` beside a strict tool: the gateway passes the tool through unseen
    and does not "correct" a call to it."""
    upstream.queue(Reply(tool_calls=[Call("bash", '{"command": "ls"}')]))
    message = ant.messages.create(
        model="msg-up",
        max_tokens=64,
        messages=USER,
        tools=[
            {"type": "bash_20250124", "name": "bash"},
            {"name": "read", "input_schema": SCHEMA, "strict": True},
        ],
    )
    [block] = message.content
    assert block.type == "tool_use" and block.name == "bash"
    assert len(upstream.requests) == 1
    assert upstream.requests[0].body["tools"][0] == {"type": "bash_20250124", "name": "bash"}


def test_server_tools_cross_wire_are_refused(
    ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        ant.messages.create(
            model="chat-up",
            max_tokens=64,
            messages=USER,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_parameter", "tools[0].type")
    assert upstream.requests == []


# -- Codex ---------------------------------------------------------------------------------

NAMESPACE: Any = {
    "type": "namespace",
    "name": "repo",
    "description": "Repository tools",
    "tools": [
        {"type": "function", "name": "read_file", "parameters": SCHEMA},
        {
            "type": "function",
            "name": "list_dir",
            "strict": False,
            "parameters": {"type": "object", "properties": {}},
        },
    ],
}


def test_codex_namespace_tools_are_flattened_cross_wire_and_enforced(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("read_file", '{"path": 3}')]),
        Reply(tool_calls=[Call("read_file", '{"path": "a.py"}')]),
    )
    raw = oai.responses.with_raw_response.create(
        model="chat-up",
        input="read a.py",
        tools=[NAMESPACE],
        reasoning={"summary": "auto"},
        prompt_cache_key="thread-1",
        extra_body={"client_metadata": {"session": "s"}},
    )
    response = raw.parse()
    [call] = [item for item in response.output if item.type == "function_call"]
    assert call.arguments == '{"path": "a.py"}'  # strict inside the namespace: corrected
    assert _dropped(raw.headers) == ["client_metadata", "reasoning.summary"]
    first = upstream.requests[0].body
    assert [t["function"]["name"] for t in first["tools"]] == ["read_file", "list_dir"]
    assert first["prompt_cache_key"] == "thread-1"


def test_codex_namespace_tools_are_enforced_on_the_same_wire(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("read_file", '{"path": 3}')]),
        Reply(tool_calls=[Call("read_file", '{"path": "a.py"}')]),
    )
    response = oai.responses.create(model="resp-up", input="read a.py", tools=[NAMESPACE])
    [call] = [item for item in response.output if item.type == "function_call"]
    assert call.arguments == '{"path": "a.py"}'
    first, fix = (r.body for r in upstream.requests)
    # the namespace goes as a namespace, its strict function with strict stripped (the
    # gateway enforces); the correction forces the function
    assert first["tools"][0]["type"] == "namespace"
    assert first["tools"][0]["tools"][0]["strict"] is False
    assert fix["tool_choice"] == {"type": "function", "name": "read_file"}


def test_hosted_tools_cross_wire_are_refused_and_forwarded_same_wire(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        oai.responses.create(model="msg-up", input="news?", tools=[{"type": "web_search"}])
    assert (info.value.code, info.value.param) == ("unsupported_parameter", "tools[0].type")
    assert upstream.requests == []
    upstream.queue(Reply(content="ok"))
    oai.responses.create(model="resp-up", input="news?", tools=[{"type": "web_search"}])
    assert upstream.requests[0].body["tools"] == [{"type": "web_search"}]


# -- legacy and unknown fields -------------------------------------------------------------


@pytest.mark.parametrize("model", ["chat-up", "resp-up", "msg-up"])
def test_legacy_function_calling_is_refused_explicitly(
    oai: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(
            model=model, messages=USER, functions=[{"name": "f", "parameters": {"type": "object"}}]
        )
    assert (info.value.code, info.value.param) == ("unsupported_parameter", "functions")
    assert upstream.requests == []


def test_an_unknown_field_is_the_vendors_to_judge_on_its_own_wire(
    oai: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        HttpError(
            400,
            body={
                "error": {
                    "message": "Unrecognized request argument supplied: frobnicate",
                    "type": "invalid_request_error",
                    "param": "frobnicate",
                    "code": None,
                }
            },
        )
    )
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(model="chat-up", messages=USER, extra_body={"frobnicate": 1})
    assert info.value.code == "upstream_rejected" and info.value.param == "frobnicate"
    assert upstream.requests[0].body["frobnicate"] == 1


def test_the_dropped_header_is_bounded(oai: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="ok"))
    extra = {f"unknown_field_number_{i:03d}": i for i in range(60)}
    raw = oai.chat.completions.with_raw_response.create(
        model="msg-up", messages=USER, extra_body=extra
    )
    header = raw.headers["x-syntic-dropped"]
    assert len(header) <= 1024 and header.endswith(tuple(f",+{n}" for n in range(1, 60)))
    assert header.startswith("unknown_field_number_000,unknown_field_number_001,")
    assert not any(k.startswith("unknown_field") for k in upstream.requests[0].body)


# -- where an error points -------------------------------------------------------------------

LOOSE: Any = {"type": "object", "properties": {"path": {"type": "string"}}}  # not strict


def test_a_schema_error_names_the_tools_place_in_the_clients_body(
    oai: openai.OpenAI, ant: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """Tools the canonical request does not model (a server tool, a namespace) shift the
    canonical index; the ``param`` is still the client's own place."""
    with pytest.raises(anthropic.BadRequestError) as info:
        ant.messages.create(
            model="msg-up",
            max_tokens=64,
            messages=USER,
            tools=[
                {"type": "bash_20250124", "name": "bash"},
                {"name": "read", "input_schema": LOOSE, "strict": True},
            ],
        )
    assert info.value.response.json()["error"]["param"].startswith("tools[1].input_schema")
    namespace: Any = {
        **NAMESPACE,
        "tools": [{"type": "function", "name": "read_file", "parameters": LOOSE}],
    }
    with pytest.raises(openai.BadRequestError) as oinfo:
        oai.responses.create(model="resp-up", input="x", tools=[{"type": "web_search"}, namespace])
    assert str(oinfo.value.param).startswith("tools[1].tools[0].parameters")
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('provider = "openai"\nmax_tokens_field = "n_predict"', "max_tokens_field must be one of"),
        ('provider = "anthropic"\nmax_tokens_field = "max_tokens"', "applies to provider"),
        (
            'provider = "openai"\napi = "responses"\nmax_tokens_field = "max_tokens"',
            "applies to provider",
        ),
    ],
)
def test_max_tokens_field_config_errors(tmp_path: Path, extra: str, message: str) -> None:
    config = tmp_path / "g.toml"
    config.write_text(f'[[models]]\nname = "m"\nbase_url = "http://127.0.0.1:1/v1"\n{extra}\n')
    with pytest.raises(ConfigError, match=message):
        load_settings(config, env={})


@pytest.mark.parametrize("provider", ["anthropic", "local"])
def test_the_default_max_tokens_field_spelled_out_is_accepted_anywhere(
    tmp_path: Path, provider: str
) -> None:
    config = tmp_path / "g.toml"
    config.write_text(
        f'[[models]]\nname = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
        f'provider = "{provider}"\nmax_tokens_field = "max_completion_tokens"\n'
    )
    (model,) = load_settings(config, env={}).models
    assert model.max_tokens_field == "max_completion_tokens"
