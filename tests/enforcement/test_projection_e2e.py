"""The strict projection served by the gateway: ``strictify = true`` per model and the
``x-syntic-strictify: 1`` header make every tool strict; the upstream gets the projection,
the answer is validated (corrected once) against it, canonicalized back and validated
against the client's schema; a schema with no projection travels untouched and is named in
``x-syntic-strict-refused``. Both endpoints, streamed and not, through the official SDKs."""

from __future__ import annotations

import copy
import json
from typing import Any

import anthropic
import openai
import pytest

from tests.dialects.test_openai_stream_e2e import sdk_stream
from tests.reliability.helpers import ledger_rows
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

USER: list[Any] = [{"role": "user", "content": "Where is order 582131?"}]
# Ordinary (non-strict) schemas, as MCP servers and hand-written tools send them.
LOOKUP = {
    "type": "object",
    "properties": {
        "order": {"type": "string"},
        "note": {"type": "string"},
        "detail": {"type": ["string", "null"]},
    },
    "required": ["order"],
}
PROJECTED = {
    "type": "object",
    "properties": {
        "order": {"type": "string"},
        "note": {"type": ["string", "null"]},
        "detail": {"type": ["string", "null"]},
    },
    "required": ["order", "note", "detail"],
    "additionalProperties": False,
}
FREE_FORM = {"type": "object", "properties": {"headers": {"additionalProperties": {}}}}
STRICT_ANSWER = '{"order": "582131", "note": null, "detail": null}'
CANONICAL = {"order": "582131", "detail": None}  # the injected null of "note" removed


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway  # both catalogues: tests/support/fixtures.py


def oa_tools() -> list[Any]:
    return [
        {"type": "function", "function": {"name": "lookup", "parameters": copy.deepcopy(LOOKUP)}},
        {"type": "function", "function": {"name": "fetch", "parameters": FREE_FORM}},
    ]


def an_tools() -> list[Any]:
    return [
        {"name": "lookup", "input_schema": copy.deepcopy(LOOKUP)},
        {"name": "fetch", "input_schema": FREE_FORM},
    ]


def chat(gw: GatewayProcess, model: str, header: bool) -> tuple[Any, Any]:
    extra = {"x-syntic-strictify": "1"} if header else {}
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c:
        raw = c.chat.completions.with_raw_response.create(
            model=model, messages=USER, tools=oa_tools(), extra_headers=extra
        )
        return raw.parse(), raw.headers


def messages(gw: GatewayProcess, model: str, header: bool) -> tuple[Any, Any]:
    extra = {"x-syntic-strictify": "1"} if header else {}
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        raw = c.messages.with_raw_response.create(
            model=model, max_tokens=256, messages=USER, tools=an_tools(), extra_headers=extra
        )
        return raw.parse(), raw.headers


def sent(upstream: ScriptedUpstream, name: str) -> tuple[dict[str, Any], Any]:
    for tool in upstream.requests[0].body["tools"]:
        fn = tool.get("function", tool)
        if fn["name"] == name:
            return fn.get("parameters", fn.get("input_schema")), fn.get("strict")
    raise AssertionError(name)


@pytest.mark.parametrize(
    ("model", "header"),
    [("strict-model", True), ("oa-strictify", False), ("constrained-model", True)],
)
def test_chat_completions(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str, header: bool
) -> None:
    upstream.queue(Reply(tool_calls=[Call("lookup", STRICT_ANSWER)]))
    completion, headers = chat(gw, model, header)
    [call] = completion.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == CANONICAL
    assert headers["x-syntic-schema-retries"] == "0"
    assert headers["x-syntic-strict-refused"] == "fetch"
    [row] = ledger_rows(gw, [headers["x-request-id"]]).values()
    assert row["strict_refused"] == "fetch"  # the ledger says so too
    schema, strict = sent(upstream, "lookup")
    assert schema == PROJECTED
    assert strict is (True if model == "constrained-model" else None)
    assert sent(upstream, "fetch") == (FREE_FORM, None)  # untouched, non-strict


@pytest.mark.parametrize(("model", "header"), [("oa-strict", True), ("an-strictify", False)])
def test_messages(gw: GatewayProcess, upstream: ScriptedUpstream, model: str, header: bool) -> None:
    upstream.queue(Reply(tool_calls=[Call("lookup", STRICT_ANSWER)]))
    msg, headers = messages(gw, model, header)
    assert next(b.input for b in msg.content if b.type == "tool_use") == CANONICAL
    assert headers["x-syntic-strict-refused"] == "fetch"
    [row] = ledger_rows(gw, [headers["x-request-id"]]).values()
    assert row["strict_refused"] == "fetch"
    assert sent(upstream, "lookup")[0] == PROJECTED


def test_invalid_against_the_projection_is_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("lookup", '{"order": "582131"}')]),  # "note" must be sent
        Reply(tool_calls=[Call("lookup", STRICT_ANSWER)]),
    )
    completion, headers = chat(gw, "strict-model", True)
    assert json.loads(completion.choices[0].message.tool_calls[0].function.arguments) == CANONICAL
    assert headers["x-syntic-schema-retries"] == "1"


def test_invalid_twice_is_422(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(*[Reply(tool_calls=[Call("lookup", '{"order": 1, "note": null}')])] * 2)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        chat(gw, "strict-model", True)
    assert info.value.response.json()["error"]["code"] == "tool_arguments_invalid"


def test_calls_to_refused_tools_pass_untouched(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(tool_calls=[Call("fetch", '{"headers": {"a": [1]}}')]))
    completion, headers = chat(gw, "strict-model", True)
    assert completion.choices[0].message.tool_calls[0].function.arguments == (
        '{"headers": {"a": [1]}}'
    )
    assert headers["x-syntic-strict-refused"] == "fetch"


def test_streamed(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("lookup", '{"order": 5, "note": null, "detail": null}')]),
        Reply(tool_calls=[Call("lookup", STRICT_ANSWER, id="call_x")]),
    )
    out = sdk_stream("sync", gw, tools=oa_tools(), extra_headers={"x-syntic-strictify": "1"})
    assert out.error is None and out.completion is not None
    [call] = out.completion.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == CANONICAL  # type: ignore[union-attr]
    assert out.headers["x-syntic-strict-refused"] == "fetch"
    assert (out.chunks[-1].usage.model_extra or {})["schema_retries"] == 1  # type: ignore[union-attr]


def test_messages_streamed(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(tool_calls=[Call("lookup", STRICT_ANSWER)]))
    with (
        anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c,
        c.messages.stream(
            model="an-strictify", max_tokens=256, messages=USER, tools=an_tools()
        ) as stream,
    ):
        final = stream.get_final_message()
    assert next(b.input for b in final.content if b.type == "tool_use") == CANONICAL


def test_without_the_setting_nothing_changes(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(tool_calls=[Call("lookup", '{"order": 1}')]))
    completion, headers = chat(gw, "strict-model", False)
    assert completion.choices[0].message.tool_calls[0].function.arguments == '{"order": 1}'
    assert "x-syntic-strict-refused" not in headers
    [row] = ledger_rows(gw, [headers["x-request-id"]]).values()
    assert row["strict_refused"] is None
    assert sent(upstream, "lookup") == (LOOKUP, None)


def test_bad_header_value_is_400(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    with (
        openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c,
        pytest.raises(openai.BadRequestError) as info,
    ):
        c.chat.completions.create(
            model="strict-model", messages=USER, extra_headers={"x-syntic-strictify": "yes"}
        )
    assert info.value.response.json()["error"]["param"] == "x-syntic-strictify"


# A format OpenAI's strict mode lacks: the projection keeps it (so "" is refused) and a
# constrained OpenAI upstream gets it named in the description instead.
OPEN_URL = {
    "type": "object",
    "properties": {"url": {"type": "string", "format": "uri"}},
    "required": ["url"],
}


def open_url(gw: GatewayProcess, model: str) -> tuple[Any, Any]:
    tools: Any = [{"type": "function", "function": {"name": "open", "parameters": OPEN_URL}}]
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c:
        raw = c.chat.completions.with_raw_response.create(
            model=model, messages=USER, tools=tools, extra_headers={"x-syntic-strictify": "1"}
        )
        return raw.parse(), raw.headers


@pytest.mark.parametrize("model", ["strict-model", "constrained-model"])
def test_a_format_the_vendor_lacks_is_still_enforced(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("open", '{"url": ""}')]),
        Reply(tool_calls=[Call("open", '{"url": "https://example.org/a"}')]),
    )
    completion, headers = open_url(gw, model)
    [call] = completion.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"url": "https://example.org/a"}
    assert headers["x-syntic-schema-retries"] == "1"
    schema, strict = sent(upstream, "open")
    if model == "constrained-model":  # OpenAI's strict mode has no "uri" format
        assert strict is True
        assert schema["properties"]["url"] == {"type": "string", "description": "{format: uri}"}
    else:
        assert schema["properties"]["url"] == {"type": "string", "format": "uri"}


def test_a_format_the_vendor_lacks_is_never_returned_broken(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(*[Reply(tool_calls=[Call("open", '{"url": ""}')])] * 2)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        open_url(gw, "constrained-model")
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("tool_arguments_invalid", "/url")
    assert error["errors"] == [
        {
            "pointer": "/url",
            "message": "/url must be a valid uri",
            "schema_path": "/properties/url/format",
        }
    ]


# pydantic's Cat | Dog union: Dog's "lives" is a required int | None, Cat's an int with a
# default. A dog's null is data; a cat's null was injected by the projection.
PET = {
    "$defs": {
        "Cat": {
            "properties": {
                "kind": {"const": "cat", "type": "string"},
                "lives": {"default": 9, "type": "integer"},
            },
            "required": ["kind"],
            "type": "object",
        },
        "Dog": {
            "properties": {
                "kind": {"const": "dog", "type": "string"},
                "lives": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
            "required": ["kind", "lives"],
            "type": "object",
        },
    },
    "properties": {"pet": {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}},
    "required": ["pet"],
    "type": "object",
}


# pydantic's discriminated spelling of the same union (Field(discriminator="kind")).
DISCRIMINATED = {
    **PET,
    "properties": {
        "pet": {
            "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
            "discriminator": {
                "propertyName": "kind",
                "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"},
            },
        }
    },
}


@pytest.mark.parametrize("schema", [PET, DISCRIMINATED], ids=["anyOf", "discriminated oneOf"])
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"pet": {"kind": "dog", "lives": null}}', {"pet": {"kind": "dog", "lives": None}}),
        ('{"pet": {"kind": "cat", "lives": null}}', {"pet": {"kind": "cat"}}),
    ],
    ids=["dog", "cat"],
)
def test_a_union_answer_keeps_its_branch(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    schema: dict[str, Any],
    answer: str,
    expected: dict[str, Any],
) -> None:
    upstream.queue(Reply(tool_calls=[Call("adopt", answer)]))
    tools: Any = [{"type": "function", "function": {"name": "adopt", "parameters": schema}}]
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c:
        raw = c.chat.completions.with_raw_response.create(
            model="strict-model",
            messages=USER,
            tools=tools,
            extra_headers={"x-syntic-strictify": "1"},
        )
    completion: Any = raw.parse()
    [call] = completion.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == expected
    assert raw.headers["x-syntic-schema-retries"] == "0"
    assert "x-syntic-strict-refused" not in raw.headers  # projected, oneOf included
    sent_schema, _ = sent(upstream, "adopt")
    assert "oneOf" not in json.dumps(sent_schema)  # disjoint branches go as anyOf
