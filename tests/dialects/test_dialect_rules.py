"""Each dialect's own strict rules, annotations and the provider copy, and "a strict schema
must constrain", end to end through the official SDKs (real gateway, scripted upstream)."""

from __future__ import annotations

import copy
import json
from typing import Any

import anthropic
import openai
import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

USER: list[Any] = [{"role": "user", "content": "Find pizza places in Turin."}]

# What the anthropic SDK's helpers emit: optional fields left out of ``required``.
SEARCH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "limit": {"type": "integer"},
        "cuisine": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["city"],
    "additionalProperties": False,
}
# A recursive pydantic model: the root is a ``$ref`` into ``$defs``.
TREE = {
    "$ref": "#/$defs/Node",
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name", "children"],
            "additionalProperties": False,
        }
    },
}
# Annotations real generators emit; every property required (valid on both endpoints).
ANNOTATED = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "title": "Search",
    "properties": {
        "city": {"type": "string", "examples": ["Turin"], "title": "City"},
        "limit": {"type": "integer", "default": 10, "deprecated": False},
    },
    "required": ["city", "limit"],
    "additionalProperties": False,
}
EMPTY_ITEMS = {
    "type": "object",
    "properties": {"children": {"type": "array", "items": {}}},
    "required": ["children"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway  # both catalogues: tests/support/fixtures.py


def messages(gw: GatewayProcess, model: str, schema: dict[str, Any]) -> tuple[Any, Any]:
    tool = {"name": "search", "strict": True, "input_schema": copy.deepcopy(schema)}
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        raw = c.messages.with_raw_response.create(
            model=model,
            max_tokens=256,
            messages=USER,
            tools=[tool],  # type: ignore[list-item]
        )
        return raw.parse(), raw.headers


def chat(gw: GatewayProcess, model: str, schema: dict[str, Any]) -> tuple[Any, Any]:
    tool = {
        "type": "function",
        "function": {"name": "search", "strict": True, "parameters": copy.deepcopy(schema)},
    }
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c:
        raw = c.chat.completions.with_raw_response.create(
            model=model,
            messages=USER,
            tools=[tool],  # type: ignore[list-item]
        )
        return raw.parse(), raw.headers


def sent_schema(upstream: ScriptedUpstream, i: int = 0) -> tuple[dict[str, Any], Any]:
    """The first tool's schema and ``strict`` flag as the upstream received them."""
    tool = upstream.requests[i].body["tools"][0]
    if "function" in tool:
        return tool["function"]["parameters"], tool["function"].get("strict")
    return tool["input_schema"], tool.get("strict")


@pytest.mark.parametrize("model", ["oa-strict", "an-strict"])
def test_messages_accepts_optional_properties(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(Reply(tool_calls=[Call("search", '{"city": "Turin"}')]))
    msg, headers = messages(gw, model, SEARCH)
    [block] = [b for b in msg.content if b.type == "tool_use"]
    assert block.input == {"city": "Turin"}
    assert headers["x-syntic-schema-retries"] == "0"
    assert sent_schema(upstream)[0] == SEARCH  # the client's schema, as sent


@pytest.mark.parametrize("model", ["oa-strict", "an-strict"])
def test_messages_optional_property_still_validated(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": "ten"}')]),
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 10}')]),
    )
    msg, headers = messages(gw, model, SEARCH)
    [block] = [b for b in msg.content if b.type == "tool_use"]
    assert block.input == {"city": "Turin", "limit": 10}
    assert headers["x-syntic-schema-retries"] == "1"


def test_messages_accepts_a_recursive_root_ref(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    args = {"name": "root", "children": [{"name": "leaf", "children": []}]}
    upstream.queue(Reply(tool_calls=[Call("search", json.dumps(args))]))
    msg, headers = messages(gw, "oa-strict", TREE)
    [block] = [b for b in msg.content if b.type == "tool_use"]
    assert block.input == args
    assert headers["x-syntic-schema-retries"] == "0"


def test_chat_completions_keeps_every_property_required(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(gw, "strict-model", SEARCH)
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == (
        "schema_not_strict",
        "tools[0].function.parameters.required",
    )
    with pytest.raises(openai.BadRequestError) as info:
        chat(gw, "strict-model", TREE)
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("schema_not_strict", "tools[0].function.parameters")
    assert upstream.requests == []


def test_empty_schemas_are_refused_with_their_path(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(gw, "strict-model", EMPTY_ITEMS)
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == (
        "schema_not_strict",
        "tools[0].function.parameters.properties.children.items",
    )
    described = {**SEARCH, "properties": {**SEARCH["properties"], "near": {"description": "x"}}}
    with pytest.raises(anthropic.BadRequestError) as ainfo:
        messages(gw, "an-strict", described)
    error = ainfo.value.response.json()["error"]
    assert (error["code"], error["param"]) == (
        "schema_not_strict",
        "tools[0].input_schema.properties.near",
    )
    assert upstream.requests == []


@pytest.mark.parametrize("endpoint", ["chat", "messages"])
def test_annotations_accepted_and_validated_against_the_client_schema(
    gw: GatewayProcess, upstream: ScriptedUpstream, endpoint: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin"}')]),
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 10}')]),
    )
    if endpoint == "chat":
        completion, headers = chat(gw, "strict-model", ANNOTATED)
        args = json.loads(completion.choices[0].message.tool_calls[0].function.arguments)
    else:
        msg, headers = messages(gw, "an-strict", ANNOTATED)
        args = next(b.input for b in msg.content if b.type == "tool_use")
    assert args == {"city": "Turin", "limit": 10}  # the default did not stand in for "limit"
    assert headers["x-syntic-schema-retries"] == "1"


def _no_annotations(schema: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(schema)
    del out["$schema"]
    del out["properties"]["city"]["examples"]
    del out["properties"]["limit"]["default"]
    del out["properties"]["limit"]["deprecated"]
    return out


@pytest.mark.parametrize(
    ("endpoint", "model"),
    [("chat", "constrained-model"), ("messages", "an-constrained"), ("messages", "oa-constrained")],
)
def test_constrained_upstream_gets_the_copy_without_annotations(
    gw: GatewayProcess, upstream: ScriptedUpstream, endpoint: str, model: str
) -> None:
    upstream.queue(Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 3}')]))
    if endpoint == "chat":
        chat(gw, model, ANNOTATED)
    else:
        messages(gw, model, ANNOTATED)
    schema, strict = sent_schema(upstream)
    assert strict is True
    assert schema == _no_annotations(ANNOTATED)  # title and description stay


def test_optional_properties_travel_as_the_projection_to_an_every_property_upstream(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    # What a strict model must send under the projection: every property, null for absent.
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": 7, "limit": null, "cuisine": null}')]),
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": null, "cuisine": null}')]),
    )
    msg, headers = messages(gw, "oa-constrained", SEARCH)
    schema, strict = sent_schema(upstream)
    assert strict is True  # OpenAI strict mode would refuse SEARCH itself
    assert schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "limit": {"type": ["integer", "null"]},
            "cuisine": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["city", "limit", "cuisine"],
        "additionalProperties": False,
    }
    # Canonicalized back: the injected null of "limit" removed, "cuisine"'s null is data.
    assert next(b.input for b in msg.content if b.type == "tool_use") == {
        "city": "Turin",
        "cuisine": None,
    }
    assert headers["x-syntic-schema-retries"] == "1"
