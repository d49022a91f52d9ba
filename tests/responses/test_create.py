"""``client.responses.create`` / ``parse``: function tools strict by default, validated,
corrected once or refused (422), ``text.format`` json_schema enforced, unknown fields 400."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pydantic
import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

REFUND: dict[str, Any] = {
    "type": "function",
    "name": "create_refund",
    "description": "Refund an order.",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "amount_pence": {"type": "integer"}},
        "required": ["order_id", "amount_pence"],
        "additionalProperties": False,
    },
}  # no "strict": the Responses API's default is strict


class Weather(pydantic.BaseModel):
    city: str
    celsius: int


@pytest.mark.parametrize("model", ["strict-model", "an-strict"])
def test_valid_call_is_a_function_call_item(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(
            tool_calls=[Call("create_refund", '{"order_id": "A1", "amount_pence": 1200}')],
            usage=(30, 9),
        )
    )
    raw = client.responses.with_raw_response.create(
        model=model,
        input="Refund order A1, 12 pounds.",
        tools=[REFUND],  # type: ignore[list-item]
    )
    response = raw.parse()
    assert raw.headers["x-syntic-schema-retries"] == "0"
    assert response.id.startswith("resp_") and response.object == "response"
    assert response.status == "completed" and response.model == model
    [item] = response.output
    assert item.type == "function_call"
    assert item.id is not None and item.id.startswith("fc_")
    assert item.name == "create_refund" and item.status == "completed"
    assert json.loads(item.arguments) == {"order_id": "A1", "amount_pence": 1200}
    assert item.call_id
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 9)
    assert response.usage.total_tokens == 39
    assert response.tools[0].strict is True  # type: ignore[union-attr]
    assert response.parallel_tool_calls is True and response.tool_choice == "auto"


def test_text_reply_is_a_message_item(client: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="Hello there."))
    response = client.responses.create(
        model="strict-model",
        input=[{"role": "user", "content": "Hi"}],
        instructions="Be brief.",
        metadata={"ticket": "T-1"},
    )
    [item] = response.output
    assert item.type == "message" and item.role == "assistant" and item.id.startswith("msg_")
    assert item.content[0].type == "output_text" and item.content[0].annotations == []
    assert response.output_text == "Hello there."
    assert response.instructions == "Be brief." and response.metadata == {"ticket": "T-1"}
    sent = upstream.requests[0].body
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]


def test_strict_is_the_default_and_the_upstream_enforces_nothing(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", '{"order_id": "A1", "amount_pence": "12"}')]),
        Reply(
            tool_calls=[Call("create_refund", '{"order_id": "A1", "amount_pence": 1200}')],
            usage=(40, 8),
        ),
    )
    raw = client.responses.with_raw_response.create(
        model="strict-model",
        input="Refund A1",
        tools=[REFUND],  # type: ignore[list-item]
    )
    response = raw.parse()
    assert raw.headers["x-syntic-schema-retries"] == "1"
    [item] = response.output
    assert item.type == "function_call"
    assert json.loads(item.arguments)["amount_pence"] == 1200
    assert response.usage is not None and response.usage.model_extra is not None
    assert response.usage.model_extra["schema_retries"] == 1
    assert response.usage.input_tokens == 50  # both upstream calls
    assert "strict" not in upstream.requests[0].body["tools"][0]["function"]
    feedback = upstream.requests[1].body["messages"][-1]["content"]
    assert "/amount_pence" in feedback


def test_still_invalid_after_the_correction_is_422(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    bad = Call("create_refund", '{"order_id": "A1", "amount_pence": "12"}')
    upstream.queue(Reply(tool_calls=[bad]), Reply(tool_calls=[bad]))
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.responses.create(model="strict-model", input="Refund", tools=[REFUND])  # type: ignore[list-item]
    assert info.value.code == "tool_arguments_invalid"
    assert info.value.param == "/amount_pence"
    assert len(upstream.requests) == 2


def test_non_strict_tool_passes_untouched(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(tool_calls=[Call("create_refund", '{"amount_pence": "12"}')]))
    response = client.responses.create(
        model="strict-model",
        input="Refund",
        tools=[{**REFUND, "strict": False}],  # type: ignore[list-item]
    )
    assert response.output[0].arguments == '{"amount_pence": "12"}'  # type: ignore[union-attr]


def test_schema_not_strict_is_400_with_the_responses_param(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    loose = {**REFUND, "parameters": {**REFUND["parameters"], "additionalProperties": True}}
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="strict-model", input="x", tools=[loose])  # type: ignore[list-item]
    assert info.value.code == "schema_not_strict"
    assert info.value.param == "tools[0].parameters"
    nested = {
        **REFUND,
        "parameters": {
            "type": "object",
            "properties": {"x": {"type": "object", "properties": {}}},
            "required": ["x"],
            "additionalProperties": False,
        },
    }
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="strict-model", input="x", tools=[nested])  # type: ignore[list-item]
    assert info.value.param == "tools[0].parameters.properties.x"
    assert upstream.requests == []


def test_parse_with_a_pydantic_model_validates_the_output(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(content='{"city": "Turin", "celsius": "warm"}'),
        Reply(content='{"city": "Turin", "celsius": 21}'),
    )
    parsed = client.responses.parse(model="strict-model", input="Weather?", text_format=Weather)
    assert parsed.output_parsed == Weather(city="Turin", celsius=21)
    assert len(upstream.requests) == 2
    first = upstream.requests[0].body["response_format"]
    assert first["type"] == "json_schema" and "strict" not in first["json_schema"]


def test_strict_json_output_still_invalid_is_422(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content='{"city": 1}'), Reply(content="not json"))
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.responses.parse(model="an-strict", input="Weather?", text_format=Weather)
    assert info.value.code == "json_output_invalid"


@pytest.mark.parametrize(
    ("extra", "param", "code"),
    [
        ({"background": True}, "background", "unsupported_parameter"),
        # a hosted tool and a hosted tool's item, to a chat-completions upstream
        ({"tools": [{"type": "web_search"}]}, "tools[0].type", "unsupported_parameter"),
        (
            {"input": [{"type": "item_reference", "id": "x"}]},
            "input[0].type",
            "unsupported_parameter",
        ),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role", "invalid_request"),
        ({"input": [{"role": ["user"], "content": "x"}]}, "input[0].role", "invalid_request"),
        (
            {"text": {"format": {"type": "json_schema", "name": "x", "schema": 3}}},
            "text.format.schema",
            "invalid_request",
        ),
        ({"temperature": 3}, "temperature", "invalid_request"),
        ({"include": [3]}, "include[0]", "invalid_request"),
    ],
)
def test_bad_or_unsupported_fields_are_400_with_param(
    gw: GatewayProcess, upstream: ScriptedUpstream, extra: dict[str, Any], param: str, code: str
) -> None:
    body = {"model": "strict-model", "input": "hi", **extra}
    answer = httpx.post(
        gw.base_url + "/v1/responses", json=body, headers={"authorization": f"Bearer {gw.api_key}"}
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, code)
    assert answer.json()["request_id"].startswith("req_")
    assert upstream.requests == []


def test_unknown_fields_to_another_wire_are_dropped_with_notice(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """``strict-model`` speaks chat completions: what the table does not know, and what it
    drops for that wire, is left out and named in ``x-syntic-dropped``."""
    upstream.queue(Reply(content="ok"))
    body = {
        "model": "strict-model",
        "input": "hi",
        "frobnicate": 1,
        "tools": [{**REFUND, "color": "red"}],
        "include": ["message.output_text.logprobs"],
    }
    answer = httpx.post(
        gw.base_url + "/v1/responses", json=body, headers={"authorization": f"Bearer {gw.api_key}"}
    )
    assert answer.status_code == 200
    assert answer.headers["x-syntic-dropped"].split(",") == [
        "frobnicate",
        "include",
        "tools[].color",
    ]
    [sent] = upstream.requests
    assert "frobnicate" not in sent.body and "include" not in sent.body
    assert "color" not in sent.body["tools"][0]
