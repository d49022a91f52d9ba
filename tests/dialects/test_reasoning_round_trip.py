"""Reasoning survives the round trip: thinking blocks an Anthropic client sends back in the
assistant turn, and reasoning items (``encrypted_content``) a Responses client sends back
in ``input`` or through ``previous_response_id``, reach an upstream of the same wire
unchanged, and a correction sends the answer's own reasoning back before the bad call. Any
other upstream gets the turn without them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from tests.support.anthropic_wire import thinking_block
from tests.support.dialect_clients import ask
from tests.support.gateway_proc import GatewayProcess
from tests.support.responses_wire import reasoning_item
from tests.support.scripted_upstream import (
    Call,
    ReasoningItem,
    Reply,
    ScriptedUpstream,
    Thinking,
)
from tests.support.three_wires import start_three_wire_gateway

THOUGHT = Thinking("The order number is in the message.", signature="EqQBCgIYAhIM-signed")
REDACTED = Thinking("c2VhbGVkLXRoaW5raW5n", redacted=True)
REASONING = ReasoningItem("rs_up_7", ("Looking the order up.",), encrypted_content="gAAAAB-x")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order": {"type": "string", "pattern": "^[0-9]+$"}},
    "required": ["order"],
    "additionalProperties": False,
}
GOOD = '{"order": "41"}'


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_three_wire_gateway(scripted_upstream_server, tmp_path_factory.mktemp("round-trip"))
    yield gw
    gw.stop()


def anthropic_client(gw: GatewayProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0)


def openai_client(gw: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)


MESSAGES_TOOLS: Any = [{"name": "lookup", "input_schema": SCHEMA, "strict": True}]
RESPONSES_TOOLS: Any = [{"type": "function", "name": "lookup", "parameters": SCHEMA}]


@pytest.mark.parametrize("model", ["an", "oa", "rs"])
def test_an_anthropic_clients_thinking_goes_back_to_anthropic_only(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("lookup", GOOD, id="toolu_1")], thinking=(THOUGHT, REDACTED)),
        Reply(content="Order 41 ships today."),
    )
    with anthropic_client(gw) as client:
        question: Any = {"role": "user", "content": "Where is order 41?"}
        first = client.messages.create(
            model=model, max_tokens=256, messages=[question], tools=MESSAGES_TOOLS
        )
        turn: Any = [block.model_dump(exclude_none=True) for block in first.content]
        result: Any = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "shipped"}],
        }
        client.messages.create(
            model=model,
            max_tokens=256,
            tools=MESSAGES_TOOLS,
            messages=[question, {"role": "assistant", "content": turn}, result],
        )
    sent = upstream.requests[1].body
    if model == "an":
        assistant = sent["messages"][1]
        assert assistant["role"] == "assistant"
        assert assistant["content"][:2] == [thinking_block(THOUGHT), thinking_block(REDACTED)]
        assert assistant["content"][2]["type"] == "tool_use"
    else:
        assert "signature" not in str(sent) and "c2VhbGVk" not in str(sent)


@pytest.mark.parametrize("model", ["rs", "oa", "an"])
def test_a_responses_clients_reasoning_items_go_back_to_responses_only(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("lookup", GOOD, id="call_1")], reasoning=(REASONING,)),
        Reply(content="Order 41 ships today."),
    )
    with openai_client(gw) as client:
        first = client.responses.create(
            model=model, input="Where is order 41?", tools=RESPONSES_TOOLS, store=False
        )
        replay: Any = [item.model_dump(exclude_none=True) for item in first.output]
        client.responses.create(
            model=model,
            tools=RESPONSES_TOOLS,
            store=False,
            input=[
                {"role": "user", "content": "Where is order 41?"},
                *replay,
                {"type": "function_call_output", "call_id": "call_1", "output": "shipped"},
            ],
        )
    sent = upstream.requests[1].body
    if model == "rs":
        kinds = [item.get("type", "message") for item in sent["input"]]  # type defaults to message
        assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
        assert sent["input"][1] == reasoning_item(REASONING)
    else:
        assert "gAAAAB-x" not in str(sent)


def test_reasoning_comes_back_through_previous_response_id(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("lookup", GOOD, id="call_1")], reasoning=(REASONING,)),
        Reply(content="Order 41 ships today."),
    )
    with openai_client(gw) as client:
        first = client.responses.create(
            model="rs", input="Where is order 41?", tools=RESPONSES_TOOLS
        )
        client.responses.create(
            model="rs",
            previous_response_id=first.id,
            tools=RESPONSES_TOOLS,
            input=[{"type": "function_call_output", "call_id": "call_1", "output": "shipped"}],
        )
    sent = upstream.requests[1].body["input"]
    assert [item.get("type") for item in sent] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert sent[1]["encrypted_content"] == "gAAAAB-x"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_correction_sends_the_answers_thinking_back_first(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    bad = Reply(tool_calls=[Call("lookup", '{"order": "A1"}', id="toolu_1")], thinking=(THOUGHT,))
    good = Reply(tool_calls=[Call("lookup", GOOD, id="toolu_2")])
    for _ in range(2 if stream else 1):
        upstream.queue(bad, good)
    ask(gw, "messages", "an", stream=stream, extra={"tools": MESSAGES_TOOLS})
    fix = upstream.requests[1].body
    assistant = fix["messages"][-2]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == thinking_block(THOUGHT)
    assert assistant["content"][1]["type"] == "tool_use"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_correction_sends_the_answers_reasoning_items_back_first(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    bad = Reply(tool_calls=[Call("lookup", '{"order": "A1"}', id="call_1")], reasoning=(REASONING,))
    good = Reply(tool_calls=[Call("lookup", GOOD, id="call_2")])
    for _ in range(2 if stream else 1):
        upstream.queue(bad, good)
    ask(gw, "responses", "rs", stream=stream, extra={"tools": RESPONSES_TOOLS})
    fix = upstream.requests[1].body["input"]
    assert [item.get("type") for item in fix] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert fix[1]["encrypted_content"] == "gAAAAB-x"
