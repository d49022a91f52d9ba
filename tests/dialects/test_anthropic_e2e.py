"""End to end: the official ``anthropic`` SDK against ``POST /v1/messages``.

The gateway runs as a real server (``syntic serve``) in front of one scripted upstream that
speaks both wire formats: ``oa-*`` models go to its chat-completions side, ``an-*`` models
to its Messages side, so every scenario runs over both upstream kinds.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pydantic
import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import REFUND_SCHEMA
from tests.support.scripted_upstream import Call, HttpError, Reply, ScriptedUpstream, without

GOOD = {"order_number": "582131", "amount_pence": 1250, "reason": "damaged", "note": None}
GOOD_ARGS = json.dumps(GOOD)
BAD_ARGS = GOOD_ARGS.replace("1250", '"12.50"')
MESSAGES: list[Any] = [{"role": "user", "content": "Order 582131 arrived crushed, refund it."}]
PROVIDERS = ["oa", "an"]


def refund_tool(strict: bool = True, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": "create_refund",
        "description": "Refund part or all of an order.",
        "strict": strict,
        "input_schema": copy.deepcopy(schema or REFUND_SCHEMA),
    }


@pytest.fixture(scope="module")
def gw(anthropic_gateway: GatewayProcess) -> GatewayProcess:
    return anthropic_gateway  # shared: tests/support/fixtures.py


@pytest.fixture
def client(gw: GatewayProcess) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        yield c


def create(gw: GatewayProcess, mode: str, **kw: Any) -> tuple[anthropic.types.Message, Any]:
    """``messages.create`` through the sync or async SDK; returns (message, headers)."""
    kw.setdefault("max_tokens", 256)
    kw.setdefault("messages", MESSAGES)
    if mode == "sync":
        with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
            raw = c.messages.with_raw_response.create(**kw)
            return raw.parse(), raw.headers

    async def run() -> tuple[anthropic.types.Message, Any]:
        async with anthropic.AsyncAnthropic(
            base_url=gw.base_url, api_key=gw.api_key, max_retries=0
        ) as c:
            raw = await c.messages.with_raw_response.create(**kw)
            return await raw.parse(), raw.headers

    return asyncio.run(run())


def forced_tool(provider: str, body: dict[str, Any]) -> str:
    """The tool a correction request forces, in the upstream's own wire format."""
    choice = body["tool_choice"]
    if provider == "an":
        assert choice["type"] == "tool"
        return str(choice["name"])
    assert choice["type"] == "function"
    return str(choice["function"]["name"])


def feedback_text(provider: str, body: dict[str, Any]) -> str:
    last = body["messages"][-1]
    if provider == "an":
        [block] = last["content"]
        assert block["type"] == "tool_result" and block["is_error"] is True
        return "".join(part["text"] for part in block["content"])
    assert last["role"] == "tool"
    return str(last["content"])


# --- non-streaming -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_valid_strict_call(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str, mode: str
) -> None:
    upstream.queue(Reply(content="Refunding.", tool_calls=[Call("create_refund", GOOD_ARGS)]))
    msg, headers = create(gw, mode, model=f"{provider}-strict", tools=[refund_tool()])
    assert headers["x-syntic-schema-retries"] == "0"
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    tool = msg.content[1]
    assert tool.type == "tool_use" and tool.input == GOOD
    assert msg.stop_reason == "tool_use"
    assert msg.model == f"{provider}-strict"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (10, 5)
    assert msg.usage.model_extra == {"schema_retries": 0}
    assert len(upstream.requests) == 1
    if provider == "an":
        sent = upstream.requests[0]
        assert sent.path == "/v1/messages"
        assert sent.headers["anthropic-version"]
        assert "strict" not in sent.body["tools"][0]  # enforced by the gateway instead


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_then_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str, mode: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="toolu_orig")]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="toolu_new")], usage=(30, 7)),
    )
    msg, headers = create(gw, mode, model=f"{provider}-strict", tools=[refund_tool()])
    assert headers["x-syntic-schema-retries"] == "1"
    [tool] = msg.content
    assert tool.type == "tool_use"
    assert (tool.id, tool.input) == ("toolu_orig", GOOD)
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (40, 12)
    assert msg.usage.model_extra == {"schema_retries": 1}
    first, correction = (r.body for r in upstream.requests)
    assert forced_tool(provider, correction) == "create_refund"
    assert "/amount_pence must be integer" in feedback_text(provider, correction)
    # Nothing else changed: same conversation plus the bad call and the feedback.
    assert without(correction, ["tool_choice", "messages"]) == without(
        first, ["tool_choice", "messages"]
    )
    assert correction["messages"][: len(first["messages"])] == first["messages"]
    assert len(correction["messages"]) == len(first["messages"]) + 2


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_twice_is_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str, mode: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    with pytest.raises(anthropic.UnprocessableEntityError) as info:
        create(gw, mode, model=f"{provider}-strict", tools=[refund_tool()])
    exc = info.value
    assert exc.response.headers["x-syntic-schema-retries"] == "1"
    body = exc.response.json()
    assert body["error"]["code"] == "tool_arguments_invalid"
    assert body["error"]["param"] == "/amount_pence"
    assert body["request_id"] == exc.response.headers["x-request-id"]
    assert exc.api_message == (
        "Arguments for create_refund did not match the schema: /amount_pence must be integer."
    )
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "bad",
    ['{"order_number": "582131", "amount_pence": 12', "[1, 2]"],
    ids=["truncated-json", "not-an-object"],
)
def test_not_json_arguments_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str, bad: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", bad)]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    msg, headers = create(gw, "sync", model=f"{provider}-strict", tools=[refund_tool()])
    assert headers["x-syntic-schema-retries"] == "1"
    assert msg.content[0].type == "tool_use" and msg.content[0].input == GOOD


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unknown_tool_name_twice_is_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("delete_everything", "{}")]),
        Reply(tool_calls=[Call("delete_everything", "{}")]),
    )
    with pytest.raises(anthropic.UnprocessableEntityError) as info:
        create(gw, "sync", model=f"{provider}-strict", tools=[refund_tool()])
    assert info.value.response.json()["error"]["code"] == "tool_arguments_invalid"
    assert "delete_everything" in (info.value.api_message or "")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_mixed_strict_and_plain_tools(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    loose = {"name": "lookup", "input_schema": {"type": "object"}}  # not strict-clean
    upstream.queue(
        Reply(tool_calls=[Call("lookup", '{"anything": [1]}'), Call("create_refund", GOOD_ARGS)])
    )
    msg, headers = create(gw, "sync", model=f"{provider}-strict", tools=[loose, refund_tool()])
    assert headers["x-syntic-schema-retries"] == "0"
    assert [(b.name, b.input) for b in msg.content if b.type == "tool_use"] == [
        ("lookup", {"anything": [1]}),
        ("create_refund", GOOD),
    ]


def test_constrained_anthropic_upstream_gets_strict_and_is_still_validated(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    msg, headers = create(gw, "sync", model="an-constrained", tools=[refund_tool()])
    sent = upstream.requests[0].body["tools"][0]
    assert sent["strict"] is True
    # The scripted upstream refuses, as Anthropic does, the bounds its strict mode lacks:
    # they travel in the description, and the gateway still checks them.
    amount = sent["input_schema"]["properties"]["amount_pence"]
    assert amount == {"type": "integer", "description": "{minimum: 1}"}
    assert headers["x-syntic-schema-retries"] == "1"
    assert msg.content[0].type == "tool_use" and msg.content[0].input == GOOD


@pytest.mark.parametrize("provider", PROVIDERS)
def test_conversation_with_images_and_tool_results(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(Reply(content="Done."))
    conversation = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Photo of the parcel:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "create_refund", "input": GOOD}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "refunded"}],
        },
    ]
    msg, _ = create(
        gw,
        "sync",
        model=f"{provider}-strict",
        system="You are a support agent.",
        messages=conversation,
        tools=[refund_tool()],
        stop_sequences=["END"],
    )
    assert msg.content[0].type == "text" and msg.content[0].text == "Done."
    assert msg.stop_reason == "end_turn"
    body = upstream.requests[0].body
    if provider == "an":
        assert body["system"] == "You are a support agent."
        assert body["messages"][0]["content"][1]["source"]["data"] == "iVBORw0KGgo="
        assert body["messages"][1]["content"][0]["input"] == GOOD
        assert body["messages"][2]["content"][0]["tool_use_id"] == "toolu_1"
        assert body["stop_sequences"] == ["END"]
    else:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user", "assistant", "tool"]
        image = body["messages"][1]["content"][1]
        assert image["image_url"]["url"] == "data:image/png;base64,iVBORw0KGgo="
        assert json.loads(body["messages"][2]["tool_calls"][0]["function"]["arguments"]) == GOOD
        assert body["messages"][3]["tool_call_id"] == "toolu_1"


# --- JSON output -----------------------------------------------------------------------

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}
FORMATS = {
    "output_config": {
        "output_config": {"format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}
    },
    "output_format": {
        "extra_body": {"output_format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}
    },
}


@pytest.mark.parametrize("spelling", list(FORMATS))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_json_output_valid_corrected_and_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str, spelling: str
) -> None:
    model = f"{provider}-strict"
    upstream.queue(Reply(content='{"answer": 42}'))
    msg, headers = create(gw, "sync", model=model, **FORMATS[spelling])
    assert msg.content[0].type == "text" and json.loads(msg.content[0].text) == {"answer": 42}
    assert headers["x-syntic-schema-retries"] == "0"
    sent = upstream.requests[0].body
    if provider == "an":  # the same wire: the format where the client put it
        where = (
            sent["output_config"]["format"]
            if spelling == "output_config"
            else sent["output_format"]
        )
        assert where["schema"] == ANSWER_SCHEMA
    else:
        assert sent["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA

    upstream.reset()
    upstream.queue(Reply(content='{"answer": "42"}'), Reply(content='{"answer": 42}'))
    msg, headers = create(gw, "sync", model=model, **FORMATS[spelling])
    assert msg.content[0].type == "text" and json.loads(msg.content[0].text) == {"answer": 42}
    assert headers["x-syntic-schema-retries"] == "1"

    upstream.queue(Reply(content="forty-two"), Reply(content='{"answer": "x"}'))
    with pytest.raises(anthropic.UnprocessableEntityError) as info:
        create(gw, "sync", model=model, **FORMATS[spelling])
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("json_output_invalid", "/answer")


BOUNDED_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer", "minimum": 1, "description": "A count"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def test_json_output_bounds_go_to_anthropic_as_it_accepts_them_and_still_hold(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content='{"answer": 0}'), Reply(content='{"answer": 3}'))
    output_config = {"format": {"type": "json_schema", "schema": BOUNDED_SCHEMA}}
    msg, headers = create(gw, "sync", model="an-strict", output_config=output_config)
    assert msg.content[0].type == "text" and json.loads(msg.content[0].text) == {"answer": 3}
    assert headers["x-syntic-schema-retries"] == "1"  # 0 broke the client's minimum
    sent = upstream.requests[0].body["output_config"]["format"]["schema"]
    assert sent["properties"]["answer"] == {
        "type": "integer",
        "description": "A count\n\n{minimum: 1}",
    }


class Answer(pydantic.BaseModel):
    answer: int
    unit: str | None  # required, nullable: strict-clean as the SDK writes it


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sdk_parse_helper_with_pydantic_output(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str
) -> None:
    upstream.queue(
        Reply(content='{"answer": "x", "unit": null}'), Reply(content='{"answer": 7, "unit": "kg"}')
    )
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        parsed = c.messages.parse(
            model=f"{provider}-strict", max_tokens=64, messages=MESSAGES, output_format=Answer
        )
    assert parsed.parsed_output == Answer(answer=7, unit="kg")
    assert parsed.usage.model_extra == {"schema_retries": 1}


# --- every 400 with its param, before any upstream call ---------------------------------

NESTED_NOT_STRICT = copy.deepcopy(REFUND_SCHEMA)
NESTED_NOT_STRICT["properties"]["note"] = {"type": "object", "properties": {}, "required": []}
EMPTY_ITEMS = copy.deepcopy(REFUND_SCHEMA)
EMPTY_ITEMS["properties"]["tags"] = {"type": "array", "items": {}}
EMPTY_ITEMS["required"].append("tags")
UNSUPPORTED = copy.deepcopy(REFUND_SCHEMA)
UNSUPPORTED["properties"]["reason"] = {"not": {"type": "string"}}
NO_ADDITIONAL = {k: v for k, v in REFUND_SCHEMA.items() if k != "additionalProperties"}
PLAIN = {"name": "lookup", "input_schema": {"type": "object"}}
FORMAT_NOT_STRICT = {"type": "json_schema", "schema": NO_ADDITIONAL}

SCHEMA_ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "nested-object",
        {"tools": [PLAIN, PLAIN | {"name": "other"}, refund_tool(schema=NESTED_NOT_STRICT)]},
        "schema_not_strict",
        "tools[2].input_schema.properties.note",
    ),
    (
        "missing-additional",
        {"tools": [refund_tool(schema=NO_ADDITIONAL)]},
        "schema_not_strict",
        "tools[0].input_schema",
    ),
    (
        "empty-items",
        {"tools": [PLAIN, refund_tool(schema=EMPTY_ITEMS)]},
        "schema_not_strict",
        "tools[1].input_schema.properties.tags.items",
    ),
    (
        "unsupported-keyword",
        {"tools": [refund_tool(schema=UNSUPPORTED)]},
        "invalid_tool_schema",
        "tools[0].input_schema.properties.reason.not",
    ),
    (
        "output-config",
        {"output_config": {"format": FORMAT_NOT_STRICT}},
        "schema_not_strict",
        "output_config.format.schema",
    ),
    (
        "output-format",
        {"extra_body": {"output_format": FORMAT_NOT_STRICT}},
        "schema_not_strict",
        "output_format.schema",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "code", "param"),
    [(k, c, p) for _, k, c, p in SCHEMA_ERRORS],
    ids=[n for n, *_ in SCHEMA_ERRORS],
)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_schema_400s(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    provider: str,
    kwargs: dict[str, Any],
    code: str,
    param: str,
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        create(gw, "sync", model=f"{provider}-strict", **kwargs)
    body = info.value.response.json()
    assert (body["error"]["code"], body["error"]["param"]) == (code, param)
    assert info.value.response.headers["x-syntic-schema-retries"] == "0"
    assert upstream.requests == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tools": [refund_tool()]},
        {"output_config": {"format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}},
    ],
    ids=["strict-tool", "json-output"],
)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_strict_not_supported(
    gw: GatewayProcess, upstream: ScriptedUpstream, provider: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        create(gw, "sync", model=f"{provider}-plain", **kwargs)
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("strict_not_supported", "model")
    assert upstream.requests == []


def test_non_strict_tools_pass_on_a_plain_model(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(tool_calls=[Call("create_refund", BAD_ARGS)]))
    msg, _ = create(gw, "sync", model="an-plain", tools=[refund_tool(strict=False)])
    assert msg.content[0].type == "tool_use"
    assert msg.content[0].input["amount_pence"] == "12.50"  # unchecked, as sent


SHAPE_ERRORS: list[tuple[str, dict[str, Any], int, str | None]] = [
    (  # a block only the Messages API takes, bound for another wire: refused (policy)
        "block-type-cross-wire",
        {
            "model": "oa-strict",
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": "video"}]},
            ],
        },
        400,
        "messages[1].content[0].type",
    ),
    (
        "block-type-not-a-string",
        {"messages": [{"role": "user", "content": [{"type": 7}]}]},
        400,
        "messages[0].content[0].type",
    ),
    ("no-max-tokens", {"max_tokens": None}, 400, "max_tokens"),
    ("bad-tool-choice", {"tool_choice": {"type": "maybe"}}, 400, "tool_choice.type"),
    ("unknown-model", {"model": "nope"}, 404, "model"),
]


@pytest.mark.parametrize(
    ("changes", "status", "param"),
    [(c, s, p) for _, c, s, p in SHAPE_ERRORS],
    ids=[n for n, *_ in SHAPE_ERRORS],
)
def test_shape_errors(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    changes: dict[str, Any],
    status: int,
    param: str | None,
) -> None:
    body: dict[str, Any] = {"model": "an-strict", "max_tokens": 10, "messages": MESSAGES}
    body.update(changes)
    body = {k: v for k, v in body.items() if v is not None}
    resp = httpx.post(
        gw.base_url + "/v1/messages",
        json=body,
        headers={"x-api-key": gw.api_key, "anthropic-version": "2023-06-01"},
    )
    assert resp.status_code == status
    assert resp.json()["error"]["param"] == param
    assert upstream.requests == []


def test_malformed_json_body(gw: GatewayProcess) -> None:
    resp = httpx.post(
        gw.base_url + "/v1/messages", content=b"{nope", headers={"x-api-key": gw.api_key}
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "invalid_json"


# --- auth ------------------------------------------------------------------------------


def test_auth_x_api_key_and_bearer(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="one"), Reply(content="two"))
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        raw = c.messages.with_raw_response.create(
            model="an-strict", max_tokens=5, messages=MESSAGES
        )
        assert raw.parse().content[0].type == "text"
    assert upstream.requests[0].headers.get("x-api-key") is None  # our key never leaks upstream
    with anthropic.Anthropic(base_url=gw.base_url, auth_token=gw.api_key, max_retries=0) as c:
        msg = c.messages.create(model="an-strict", max_tokens=5, messages=MESSAGES)
        assert msg.content[0].type == "text" and msg.content[0].text == "two"


def test_auth_wrong_key_raises_sdk_error(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    with (
        anthropic.Anthropic(base_url=gw.base_url, api_key="sk_live_wrong", max_retries=0) as c,
        pytest.raises(anthropic.AuthenticationError) as info,
    ):
        c.messages.create(model="an-strict", max_tokens=5, messages=MESSAGES)
    assert info.value.response.json()["error"]["type"] == "authentication_error"
    assert upstream.requests == []


@pytest.mark.parametrize(
    "headers",
    [{"x-api-key": "sk_live_wrong"}, {"authorization": "Bearer sk_live_wrong"}, {}],
    ids=["x-api-key", "bearer", "none"],
)
def test_auth_rejected(
    gw: GatewayProcess, upstream: ScriptedUpstream, headers: dict[str, str]
) -> None:
    body = {"model": "an-strict", "max_tokens": 5, "messages": MESSAGES}
    resp = httpx.post(gw.base_url + "/v1/messages", json=body, headers=headers)
    assert resp.status_code == 401
    assert resp.json()["error"]["type"] == "authentication_error"
    assert upstream.requests == []


def test_upstream_failure_is_502(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(HttpError(500))
    with pytest.raises(anthropic.InternalServerError) as info:
        create(gw, "sync", model="an-strict")
    assert info.value.status_code == 502
    assert "scripted error 500" in (info.value.api_message or "")


# --- chat-completions clients on an Anthropic upstream ------------------------------------


def test_chat_completions_client_on_anthropic_upstream(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    tool: Any = {
        "type": "function",
        "function": {"name": "create_refund", "strict": True, "parameters": REFUND_SCHEMA},
    }
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="toolu_x")]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c:
        raw = c.chat.completions.with_raw_response.create(
            model="an-strict", messages=MESSAGES, tools=[tool]
        )
    completion = raw.parse()
    assert raw.headers["x-syntic-schema-retries"] == "1"
    [call] = completion.choices[0].message.tool_calls or []
    assert call.id == "toolu_x" and call.type == "function"
    assert json.loads(call.function.arguments) == GOOD
    assert [r.path for r in upstream.requests] == ["/v1/messages", "/v1/messages"]
    assert upstream.requests[1].body["tool_choice"] == {"type": "tool", "name": "create_refund"}
