"""Tool arguments (and strict JSON output) with a duplicate key are invalid: one correction,
then 422, never returned; on both endpoints, streamed and not, through the official SDKs.

The duplicate's last value is valid, so a parser that keeps the last member (orjson, the
stdlib) would have passed it: the test fails without the check.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tests.dialects.test_openai_stream_e2e import calls_of, sdk_stream
from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import GOOD_ARGS, MESSAGES, REFUND_SCHEMA, make_chat, refund_tool
from tests.support.scripted_upstream import Call, Raw, Reply, ScriptedUpstream

DUP_ARGS = GOOD_ARGS[:-1] + ', "amount_pence": 1250}'
DUP_ARGS = DUP_ARGS.replace('"amount_pence": 1250,', '"amount_pence": "12.50",', 1)
ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway  # both catalogues: tests/support/fixtures.py


def test_dup_args_parse_to_a_valid_value() -> None:
    assert json.loads(DUP_ARGS) == json.loads(GOOD_ARGS)


def test_chat_corrected(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", DUP_ARGS)]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    result = make_chat("sync", gw.base_url + "/v1", gw.api_key)(tools=[refund_tool()])
    [call] = result.completion.choices[0].message.tool_calls or []
    assert call.function.arguments == GOOD_ARGS  # type: ignore[union-attr]
    assert result.headers["x-syntic-schema-retries"] == "1"
    feedback = upstream.requests[1].body["messages"][-1]["content"]
    assert 'duplicate key "amount_pence"' in feedback


def test_chat_invalid_twice(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(*[Reply(tool_calls=[Call("create_refund", DUP_ARGS)])] * 2)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        make_chat("sync", gw.base_url + "/v1", gw.api_key)(tools=[refund_tool()])
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("tool_arguments_invalid", "")
    assert DUP_ARGS not in info.value.response.text


def test_chat_streamed(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", DUP_ARGS, id="call_a")]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    out = sdk_stream("sync", gw)
    assert out.error is None
    assert calls_of(out.completion) == [("call_a", "create_refund", GOOD_ARGS)]
    assert (out.chunks[-1].usage.model_extra or {})["schema_retries"] == 1  # type: ignore[union-attr]


def test_chat_streamed_invalid_twice(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(*[Reply(tool_calls=[Call("create_refund", DUP_ARGS)])] * 2)
    # nothing shown before the call: a plain 422, no stream
    with pytest.raises(openai.UnprocessableEntityError) as info:
        sdk_stream("sync", gw)
    assert info.value.code == "tool_arguments_invalid"


def test_chat_json_output(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(content='{"answer": 1, "answer": "yes"}'), Reply(content='{"answer": "yes"}')
    )
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "strict": True, "schema": ANSWER}}
    result = make_chat("sync", gw.base_url + "/v1", gw.api_key)(response_format=fmt)
    assert result.completion.choices[0].message.content == '{"answer": "yes"}'
    assert result.headers["x-syntic-schema-retries"] == "1"
    upstream.queue(*[Reply(content='{"answer": 1, "answer": "yes"}')] * 2)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        make_chat("sync", gw.base_url + "/v1", gw.api_key)(response_format=fmt)
    assert info.value.response.json()["error"]["code"] == "json_output_invalid"


def _tool() -> dict[str, Any]:
    return {"name": "create_refund", "strict": True, "input_schema": REFUND_SCHEMA}


def _messages(gw: GatewayProcess, model: str = "oa-strict", **kw: Any) -> tuple[Any, Any]:
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        raw = c.messages.with_raw_response.create(
            model=model, max_tokens=256, messages=MESSAGES[1:], **kw
        )
        return raw.parse(), raw.headers


def _stream(c: anthropic.Anthropic) -> Any:
    return c.messages.stream(
        model="oa-strict",
        max_tokens=256,
        messages=MESSAGES[1:],
        tools=[_tool()],  # type: ignore[list-item]
    )


def test_messages_corrected_and_refused(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", DUP_ARGS)]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    msg, headers = _messages(gw, tools=[_tool()])
    assert next(b.input for b in msg.content if b.type == "tool_use") == json.loads(GOOD_ARGS)
    assert headers["x-syntic-schema-retries"] == "1"
    upstream.queue(*[Reply(tool_calls=[Call("create_refund", DUP_ARGS)])] * 2)
    with pytest.raises(anthropic.UnprocessableEntityError) as info:
        _messages(gw, tools=[_tool()])
    assert info.value.response.json()["error"]["code"] == "tool_arguments_invalid"


def test_messages_streamed(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", DUP_ARGS)]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    with (
        anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c,
        _stream(c) as stream,
    ):
        final = stream.get_final_message()
    assert next(b.input for b in final.content if b.type == "tool_use") == json.loads(GOOD_ARGS)
    assert len(upstream.requests) == 2  # the first call and its one correction

    upstream.queue(*[Reply(tool_calls=[Call("create_refund", DUP_ARGS)])] * 2)
    with (
        anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c,
        pytest.raises(anthropic.UnprocessableEntityError) as info,
        _stream(c),
    ):
        pass  # nothing shown before the call: a plain 422 on entering, no stream
    assert "tool_arguments_invalid" in str(info.value.body)


def _anthropic_message(arguments: str) -> bytes:
    """A Messages answer whose tool input is ``arguments`` exactly as written (no parse)."""
    return (
        b'{"id": "msg_1", "type": "message", "role": "assistant", "model": "m",'
        b' "content": [{"type": "tool_use", "id": "toolu_1", "name": "create_refund",'
        b' "input": ' + arguments.encode() + b'}], "stop_reason": "tool_use",'
        b' "usage": {"input_tokens": 5, "output_tokens": 7}}'
    )


def test_anthropic_upstream_keeps_the_duplicate_for_validation(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """A Messages upstream's answer is JSON whose parse keeps one of the duplicates: the
    tool input is taken as the upstream wrote it, so the duplicate is still refused."""
    upstream.queue(Raw(_anthropic_message(DUP_ARGS)), Raw(_anthropic_message(GOOD_ARGS)))
    msg, headers = _messages(gw, "an-strict", tools=[_tool()])
    assert next(b.input for b in msg.content if b.type == "tool_use") == json.loads(GOOD_ARGS)
    assert headers["x-syntic-schema-retries"] == "1"
    upstream.queue(*[Raw(_anthropic_message(DUP_ARGS))] * 2)
    with pytest.raises(anthropic.UnprocessableEntityError) as info:
        _messages(gw, "an-strict", tools=[_tool()])
    assert info.value.response.json()["error"]["code"] == "tool_arguments_invalid"
