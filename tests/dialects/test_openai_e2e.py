"""End to end: openai SDK (sync and async) -> gateway subprocess -> scripted upstream."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest

from tests.support.openai_helpers import (
    BAD_ARGS,
    GOOD_ARGS,
    MESSAGES,
    REFUND_SCHEMA,
    Chat,
    calls_of,
    envelope,
    lookup_tool,
    refund_tool,
)
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream, without


def test_valid_strict_call(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="call_a")]))
    r = chat(tools=[refund_tool()])
    call = calls_of(r.completion)[0]
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_a",
        "create_refund",
        GOOD_ARGS,
    )
    assert r.headers["x-syntic-schema-retries"] == "0"
    assert r.headers["x-request-id"].startswith("req_")
    assert r.completion.model == "strict-model"
    assert r.completion.usage is not None
    assert (r.completion.usage.prompt_tokens, r.completion.usage.completion_tokens) == (10, 5)
    sent = upstream.requests[0].body
    assert sent["model"] == "strict-model-served"
    # the gateway enforces; a non-constrained upstream gets the tool without "strict"
    assert "strict" not in sent["tools"][0]["function"]
    assert sent["tools"][0]["function"]["parameters"] == REFUND_SCHEMA
    assert len(upstream.requests) == 1


def test_invalid_then_corrected(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="call_orig")], usage=(100, 20)),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="call_new")], usage=(140, 18)),
    )
    r = chat(tools=[refund_tool()], temperature=0.2)
    call = calls_of(r.completion)[0]
    assert call.id == "call_orig"
    assert orjson.loads(call.function.arguments)["amount_pence"] == 1250
    assert r.headers["x-syntic-schema-retries"] == "1"
    usage = r.completion.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (240, 38, 278)
    assert usage.model_extra == {"schema_retries": 1}
    first, second = (q.body for q in upstream.requests)
    # the correction: forced tool_choice, the bad call, the errors; nothing else changed
    assert second["tool_choice"] == {"type": "function", "function": {"name": "create_refund"}}
    assert without(second, ["messages", "tool_choice"]) == without(first, ["messages"])
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assistant, tool = second["messages"][len(first["messages"]) :]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"] == [
        {
            "id": "call_orig",
            "type": "function",
            "function": {"name": "create_refund", "arguments": BAD_ARGS},
        }
    ]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_orig"
    assert '- /amount_pence must be integer (got "12.50")' in tool["content"]
    assert "Call create_refund again" in tool["content"]


def test_invalid_twice_is_422(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    with pytest.raises(openai.UnprocessableEntityError) as info:
        chat(tools=[refund_tool()])
    body = envelope(info.value)
    assert body["error"]["code"] == "tool_arguments_invalid"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == "/amount_pence"
    assert body["error"]["message"] == (
        "Arguments for create_refund did not match the schema: /amount_pence must be integer."
    )
    headers = info.value.response.headers
    assert headers["x-syntic-schema-retries"] == "1"
    assert body["request_id"] == headers["x-request-id"]
    assert len(upstream.requests) == 2
    # Every violation with where it failed in the schema (the value sent stays inside).
    assert body["error"]["errors"] == [
        {
            "pointer": "/amount_pence",
            "message": "/amount_pence must be integer",
            "schema_path": "/properties/amount_pence/type",
        }
    ]
    assert b"12.50" not in info.value.response.content


@pytest.mark.parametrize(
    ("first", "second", "param", "fragment"),
    [
        ('{"order_number": "582131", "amount_pe', GOOD_ARGS, None, "/ is not valid JSON"),
        ("not json at all", "{also not json", "", "/ is not valid JSON"),
    ],
    ids=["truncated-json-corrected", "not-json-twice"],
)
def test_unparseable_arguments(
    chat: Chat,
    upstream: ScriptedUpstream,
    first: str,
    second: str,
    param: str | None,
    fragment: str,
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", first)]),
        Reply(tool_calls=[Call("create_refund", second)]),
    )
    if param is None:
        r = chat(tools=[refund_tool()])
        assert calls_of(r.completion)[0].function.arguments == second
        assert r.headers["x-syntic-schema-retries"] == "1"
    else:
        with pytest.raises(openai.UnprocessableEntityError) as info:
            chat(tools=[refund_tool()])
        assert info.value.body["param"] == param  # type: ignore[index]
    assert fragment in upstream.requests[1].body["messages"][-1]["content"]


def test_unknown_tool_name_is_corrected(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("refund_order", GOOD_ARGS, id="call_x")]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    r = chat(tools=[refund_tool()])
    call = calls_of(r.completion)[0]
    assert (call.id, call.function.name) == ("call_x", "create_refund")
    correction = upstream.requests[1].body
    assert correction["tool_choice"] == "required"
    assert "'refund_order' is not a tool in this request" in correction["messages"][-1]["content"]


def test_unknown_tool_name_twice_is_422(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("refund_order", GOOD_ARGS)]),
        Reply(tool_calls=[Call("refund_order", GOOD_ARGS)]),
    )
    with pytest.raises(openai.UnprocessableEntityError) as info:
        chat(tools=[refund_tool()])
    assert info.value.body["param"] == ""  # type: ignore[index]
    assert "refund_order" in info.value.body["message"]  # type: ignore[index]


def test_parallel_calls_one_bad(chat: Chat, upstream: ScriptedUpstream) -> None:
    other = GOOD_ARGS.replace("582131", "111111")
    upstream.queue(
        Reply(
            tool_calls=[
                Call("create_refund", other, id="call_1"),
                Call("create_refund", BAD_ARGS, id="call_2"),
            ]
        ),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="call_fix")]),
    )
    r = chat(tools=[refund_tool()], parallel_tool_calls=True)
    calls = calls_of(r.completion)
    assert [(c.id, c.function.arguments) for c in calls] == [
        ("call_1", other),
        ("call_2", GOOD_ARGS),
    ]
    assert r.headers["x-syntic-schema-retries"] == "1"
    assistant = upstream.requests[1].body["messages"][-2]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_2"]


def test_parallel_calls_both_bad_corrected_concurrently(
    chat: Chat, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(
            tool_calls=[
                Call("create_refund", BAD_ARGS, id="call_1"),
                Call("create_refund", "{", id="call_2"),
            ]
        ),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], delay=0.3),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], delay=0.3),
    )
    r = chat(tools=[refund_tool()])
    calls = calls_of(r.completion)
    assert [c.id for c in calls] == ["call_1", "call_2"]
    assert r.headers["x-syntic-schema-retries"] == "2"
    assert r.completion.usage is not None and r.completion.usage.prompt_tokens == 30
    # concurrent: the second correction arrived while the first was still being answered
    first_fix, second_fix = upstream.requests[1:]
    assert second_fix.received_at - first_fix.received_at < 0.25
    assert {
        m["tool_calls"][0]["id"]
        for m in (first_fix.body["messages"][-2], second_fix.body["messages"][-2])
    } == {"call_1", "call_2"}


def test_constrained_model_passes_strict_and_still_validates(
    chat: Chat, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    with pytest.raises(openai.UnprocessableEntityError) as info:
        chat(model="constrained-model", tools=[refund_tool()])
    assert info.value.body["code"] == "tool_arguments_invalid"  # type: ignore[index]
    assert upstream.requests[0].body["tools"][0]["function"]["strict"] is True


def test_mixed_strict_and_plain_tools(chat: Chat, upstream: ScriptedUpstream) -> None:
    loose = '{"order_number": 582131, "extra": true}'  # not checked: lookup_order isn't strict
    upstream.queue(
        Reply(
            tool_calls=[
                Call("lookup_order", loose, id="c1"),
                Call("create_refund", GOOD_ARGS, id="c2"),
            ]
        )
    )
    r = chat(tools=[lookup_tool(), refund_tool()])
    calls = calls_of(r.completion)
    assert [c.function.arguments for c in calls] == [loose, GOOD_ARGS]
    assert r.headers["x-syntic-schema-retries"] == "0"
    sent = upstream.requests[0].body["tools"]
    assert sent[0] == lookup_tool()


def test_plain_tools_only_no_header(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(tool_calls=[Call("lookup_order", "{broken")]))
    r = chat(tools=[lookup_tool()], model="plain-model")
    assert calls_of(r.completion)[0].function.arguments == "{broken"
    assert "x-syntic-schema-retries" not in r.headers


def test_truncated_arguments_reported_as_truncation(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", '{"order_number": "58')], finish_reason="length")
    )
    with pytest.raises(openai.UnprocessableEntityError) as info:
        chat(tools=[refund_tool()], max_tokens=8)
    assert "cut off by the token limit" in info.value.body["message"]  # type: ignore[index]
    assert info.value.response.headers["x-syntic-schema-retries"] == "0"
    assert len(upstream.requests) == 1


JSON_SCHEMA_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}, "score": {"type": "integer"}},
            "required": ["ok", "score"],
            "additionalProperties": False,
        },
    },
}


@pytest.mark.parametrize(
    ("replies", "content", "retries"),
    [
        (['{"ok": true, "score": 3}'], '{"ok": true, "score": 3}', "0"),
        (
            ['{"ok": "yes", "score": 3}', '{"ok": true, "score": 4}'],
            '{"ok": true, "score": 4}',
            "1",
        ),
        (['{"ok": "yes", "score": 3}', '{"ok": true}'], None, "1"),
    ],
    ids=["valid", "corrected", "422"],
)
def test_json_schema_output(
    chat: Chat,
    upstream: ScriptedUpstream,
    replies: list[str],
    content: str | None,
    retries: str,
) -> None:
    upstream.queue(*(Reply(content=c) for c in replies))
    if content is not None:
        r = chat(response_format=JSON_SCHEMA_FORMAT)
        assert r.completion.choices[0].message.content == content
        assert r.headers["x-syntic-schema-retries"] == retries
    else:
        with pytest.raises(openai.UnprocessableEntityError) as info:
            chat(response_format=JSON_SCHEMA_FORMAT)
        assert info.value.body["code"] == "json_output_invalid"  # type: ignore[index]
        assert info.value.body["param"] == ""  # type: ignore[index]
        assert info.value.body["message"] == (  # type: ignore[index]
            'Output did not match the schema: / must have required property "score".'
        )
        assert info.value.response.headers["x-syntic-schema-retries"] == retries
    if len(replies) > 1:
        correction = upstream.requests[1].body
        assert correction["messages"][-2] == {"role": "assistant", "content": replies[0]}
        assert "/ok must be boolean" in correction["messages"][-1]["content"]
        assert correction["response_format"] == upstream.requests[0].body["response_format"]


def test_models_list_has_capabilities(openai_client: openai.OpenAI) -> None:
    models = {m.id: m for m in openai_client.models.list()}
    assert set(models) == {"strict-model", "constrained-model", "plain-model", "slow-model"}
    assert models["plain-model"].model_extra["capabilities"] == {  # type: ignore[index]
        "strict_tools": False,
        "constrained": False,
        "json_schema_output": True,
        "streaming": True,
    }
    assert models["constrained-model"].model_extra["capabilities"]["constrained"] is True  # type: ignore[index]


async def test_async_client_fixture(
    async_openai_client: openai.AsyncOpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="hello"))
    completion = await async_openai_client.chat.completions.create(
        model="strict-model", messages=MESSAGES
    )
    assert completion.choices[0].message.content == "hello"
    assert completion.choices[0].finish_reason == "stop"


def test_json_output_truncated(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content='{"ok": tr', finish_reason="length"))
    with pytest.raises(openai.UnprocessableEntityError) as info:
        chat(response_format=JSON_SCHEMA_FORMAT, max_tokens=4)
    assert info.value.body["code"] == "json_output_invalid"  # type: ignore[index]
    assert "cut off by the token limit" in info.value.body["message"]  # type: ignore[index]
    assert info.value.response.headers["x-syntic-schema-retries"] == "0"
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    ("model", "strict_sent"), [("strict-model", False), ("constrained-model", True)]
)
def test_response_format_strict_passthrough(
    chat: Chat, upstream: ScriptedUpstream, model: str, strict_sent: bool
) -> None:
    upstream.queue(Reply(content='{"ok": false, "score": 0}'))
    chat(model=model, response_format=JSON_SCHEMA_FORMAT)
    sent = upstream.requests[0].body["response_format"]["json_schema"]
    assert sent.get("strict", False) is strict_sent
    assert sent["schema"] == JSON_SCHEMA_FORMAT["json_schema"]["schema"]
