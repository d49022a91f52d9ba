"""Every error the chat-completions endpoint returns, with its status, code and exact param,
through the openai SDK (sync and async) and raw HTTP where the SDK can't send the input."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.support.fixtures import E2E_BODY_LIMIT
from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import (
    GOOD_ARGS,
    MESSAGES,
    REFUND_SCHEMA,
    Chat,
    calls_of,
    envelope,
    lookup_tool,
    refund_tool,
)
from tests.support.scripted_upstream import Call, Drop, HttpError, Reply, ScriptedUpstream


def _schema(**changes: Any) -> dict[str, Any]:
    schema = {**REFUND_SCHEMA, **changes}
    return {k: v for k, v in schema.items() if v is not None}


NESTED_NOT_STRICT = _schema(
    properties={
        **REFUND_SCHEMA["properties"],
        "item": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
    },
    required=[*REFUND_SCHEMA["required"], "item"],
)
UNSUPPORTED = _schema(
    properties={**REFUND_SCHEMA["properties"], "note": {"type": "string", "if": {"minLength": 1}}},
)

SCHEMA_CASES = [
    # (tools, response_format, status, code, param)
    (
        [lookup_tool(), refund_tool(schema=_schema(additionalProperties=None))],
        None,
        "schema_not_strict",
        "tools[1].function.parameters",
    ),
    (
        [refund_tool(schema=_schema(required=["order_number"]))],
        None,
        "schema_not_strict",
        "tools[0].function.parameters.required",
    ),
    (
        [refund_tool(schema=NESTED_NOT_STRICT)],
        None,
        "schema_not_strict",
        "tools[0].function.parameters.properties.item",
    ),
    (
        [refund_tool(schema=UNSUPPORTED)],
        None,
        "invalid_tool_schema",
        "tools[0].function.parameters.properties.note.if",
    ),
    (
        None,
        {
            "type": "json_schema",
            "json_schema": {
                "name": "x",
                "strict": True,
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
        },
        "schema_not_strict",
        "response_format.json_schema.schema",
    ),
]


@pytest.mark.parametrize(("tools", "response_format", "code", "param"), SCHEMA_CASES)
def test_schema_rejected_before_upstream(
    chat: Chat,
    upstream: ScriptedUpstream,
    tools: Any,
    response_format: Any,
    code: str,
    param: str,
) -> None:
    kwargs: dict[str, Any] = {}
    if tools is not None:
        kwargs["tools"] = tools
    if response_format is not None:
        kwargs["response_format"] = response_format
    with pytest.raises(openai.BadRequestError) as info:
        chat(**kwargs)
    err = envelope(info.value)["error"]
    assert (err["code"], err["param"]) == (code, param)
    assert err["issues"][0]["param"] == param
    assert info.value.response.headers["x-syntic-schema-retries"] == "0"
    assert upstream.requests == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tools": [refund_tool()]},
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "strict": True, "schema": REFUND_SCHEMA},
            }
        },
    ],
    ids=["tool", "response_format"],
)
def test_strict_not_supported(chat: Chat, upstream: ScriptedUpstream, kwargs: Any) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(model="plain-model", **kwargs)
    assert (info.value.code, info.value.param) == ("strict_not_supported", "model")
    assert upstream.requests == []


def test_unknown_model(chat: Chat, upstream: ScriptedUpstream) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        chat(model="no-such-model")
    assert (info.value.code, info.value.param) == ("model_not_found", "model")


def test_too_many_tools(chat: Chat, upstream: ScriptedUpstream) -> None:
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "parameters": {}}} for i in range(129)
    ]
    with pytest.raises(openai.BadRequestError) as info:
        chat(tools=tools)
    assert (info.value.code, info.value.param) == ("too_many_tools", "tools")


def test_128_tools_allowed(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="ok"))
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "parameters": {}}} for i in range(127)
    ]
    r = chat(tools=[*tools, refund_tool()])
    assert r.completion.choices[0].message.content == "ok"


@pytest.mark.parametrize("key", ["sk_live_not_a_real_key", "garbage"])
def test_bad_key_is_401(gateway: GatewayProcess, key: str) -> None:
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="strict-model", messages=MESSAGES)
    body = envelope(info.value)
    # OpenAI's own 401 says invalid_request_error (code invalid_api_key)
    assert (body["error"]["type"], body["error"]["code"]) == (
        "invalid_request_error",
        "invalid_api_key",
    )
    assert info.value.response.headers["x-should-retry"] == "false"
    assert body["request_id"] == info.value.response.headers["x-request-id"]


@pytest.mark.parametrize(
    "headers", [{}, {"authorization": "Basic abc"}, {"authorization": "Bearer"}]
)
def test_missing_key_is_401(gateway: GatewayProcess, headers: dict[str, str]) -> None:
    r = httpx.post(gateway.base_url + "/v1/chat/completions", json={}, headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "missing_api_key"


def test_x_api_key_header_accepted(gateway: GatewayProcess) -> None:
    r = httpx.get(gateway.base_url + "/v1/models", headers={"x-api-key": gateway.api_key})
    assert r.status_code == 200


RAW_CASES = [
    # (body bytes, code, param)
    (b'{"model": "strict-model", "messages": [', "invalid_json", None),
    (b"[1, 2]", "invalid_request", None),
    (b'{"messages": []}', "invalid_request", "model"),
    (b'{"model": "strict-model"}', "invalid_request", "messages"),
    (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": "a"},'
        b' {"role": "assistant", "content": "b"}, {"role": "robot", "content": "c"}]}',
        "invalid_request",
        "messages[2].role",
    ),
    # An unhashable role (a list, an object) is a client's mistake like any other value.
    (
        b'{"model": "strict-model", "messages": [{"role": [], "content": "a"}]}',
        "invalid_request",
        "messages[0].role",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": {"a": 1}, "content": "a"}]}',
        "invalid_request",
        "messages[0].role",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": "tool", "content": "x"}]}',
        "invalid_request",
        "messages[0].tool_call_id",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": "a"}],'
        b' "tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]}',
        "invalid_request",
        "tools[0].function.strict",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": "a"}],'
        b' "tool_choice": {"type": "function", "function": {"name": "nope"}}}',
        "invalid_request",
        "tool_choice.function.name",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": "a"}],'
        b' "max_tokens": 0}',
        "invalid_request",
        "max_tokens",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": "a"}], "n": 0}',
        "invalid_request",
        "n",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": "a"}],'
        b' "temperature": "hot"}',
        "invalid_request",
        "temperature",
    ),
    (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": [{"type": "text",'
        b' "text": "a"}, {"type": 7}]}]}',
        "invalid_request",
        "messages[0].content[1].type",
    ),
]


@pytest.mark.parametrize(("body", "code", "param"), RAW_CASES)
def test_malformed_requests(
    gateway: GatewayProcess,
    upstream: ScriptedUpstream,
    body: bytes,
    code: str,
    param: str | None,
) -> None:
    r = httpx.post(
        gateway.base_url + "/v1/chat/completions",
        content=body,
        headers={"authorization": f"Bearer {gateway.api_key}", "content-type": "application/json"},
    )
    assert r.status_code == 400, r.text
    payload = r.json()
    assert set(payload) == {"error", "request_id"}
    assert (payload["error"]["code"], payload["error"]["param"]) == (code, param)
    assert payload["request_id"] == r.headers["x-request-id"]
    assert upstream.requests == []


def test_body_too_large(gateway: GatewayProcess) -> None:
    big = (
        b'{"model": "strict-model", "messages": [{"role": "user", "content": "'
        + (b"x" * (E2E_BODY_LIMIT + 10))
        + b'"}]}'
    )
    r = httpx.post(
        gateway.base_url + "/v1/chat/completions",
        content=big,
        headers={"authorization": f"Bearer {gateway.api_key}"},
    )
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"


def test_unknown_route_is_enveloped(gateway: GatewayProcess) -> None:
    r = httpx.get(
        gateway.base_url + "/v1/nope", headers={"authorization": f"Bearer {gateway.api_key}"}
    )
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert r.headers["x-request-id"] == r.json()["request_id"]


@pytest.mark.parametrize(
    ("step", "model", "exc", "status", "code"),
    [
        (HttpError(500), "strict-model", openai.InternalServerError, 502, "upstream_error"),
        ([HttpError(429)] * 3, "strict-model", openai.RateLimitError, 429, "upstream_rejected"),
        (Drop(), "strict-model", openai.InternalServerError, 502, "upstream_error"),
        (
            Reply(content="late", delay=2.0),
            "slow-model",
            openai.InternalServerError,
            504,
            "upstream_timeout",
        ),
    ],
    ids=["500", "429", "reset", "timeout"],
)
def test_upstream_failures(
    chat: Chat,
    upstream: ScriptedUpstream,
    step: Any,
    model: str,
    exc: type[Exception],
    status: int,
    code: str,
) -> None:
    upstream.queue(*(step if isinstance(step, list) else [step]))
    with pytest.raises(openai.APIStatusError) as info:
        chat(model=model)
    assert isinstance(info.value, exc)
    assert info.value.status_code == status
    assert info.value.code == code


def test_upstream_failure_during_correction(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(tool_calls=[Call("create_refund", "{")]), HttpError(503))
    with pytest.raises(openai.InternalServerError) as info:
        chat(tools=[refund_tool()])
    assert info.value.status_code == 502
    # the failed correction was still a correction call
    assert info.value.response.headers["x-syntic-schema-retries"] == "1"


def test_success_after_error_uses_pooled_client(chat: Chat, upstream: ScriptedUpstream) -> None:
    upstream.queue(Drop(), Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]))
    with pytest.raises(openai.InternalServerError):
        chat(tools=[refund_tool()])
    r = chat(tools=[refund_tool()])
    assert calls_of(r.completion)[0].function.arguments == GOOD_ARGS


def test_wrong_method_is_enveloped(gateway: GatewayProcess) -> None:
    r = httpx.get(
        gateway.base_url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {gateway.api_key}"},
    )
    assert r.status_code == 405
    assert r.json()["error"]["code"] == "method_not_allowed"
    assert r.json()["request_id"] == r.headers["x-request-id"]
