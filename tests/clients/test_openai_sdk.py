"""``openai``: ``pydantic_function_tool`` (strict, ``default`` kept, every property required)
and ``chat.completions.parse`` against the gateway."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.clients.models import Search, TreeNode
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

USER: list[Any] = [{"role": "user", "content": "Pizza in Turin, please."}]


def client(gw: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)


def test_pydantic_function_tool_with_a_default_is_accepted(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    tool: Any = openai.pydantic_function_tool(Search)
    assert tool["function"]["parameters"]["properties"]["limit"]["default"] == 10  # emitted
    args = {"city": "Turin", "limit": 3, "cuisine": None}
    upstream.queue(Reply(tool_calls=[Call("Search", json.dumps(args))]))
    with client(gw) as c:
        completion = c.chat.completions.parse(model="strict-model", messages=USER, tools=[tool])
    [call] = completion.choices[0].message.tool_calls or []
    assert call.function.parsed_arguments == Search(city="Turin", limit=3)


def test_recursive_model_is_accepted(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    args = {"name": "root", "children": [{"name": "leaf", "children": []}]}
    upstream.queue(Reply(tool_calls=[Call("TreeNode", json.dumps(args))]))
    with client(gw) as c:
        completion = c.chat.completions.parse(
            model="strict-model", messages=USER, tools=[openai.pydantic_function_tool(TreeNode)]
        )
    [call] = completion.choices[0].message.tool_calls or []
    assert call.function.parsed_arguments == TreeNode.model_validate(args)


def test_constrained_upstream_gets_it_without_default(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    args = '{"city": "Turin", "limit": 1, "cuisine": null}'
    upstream.queue(Reply(tool_calls=[Call("Search", args)]))
    with client(gw) as c:
        c.chat.completions.create(
            model="constrained-model", messages=USER, tools=[openai.pydantic_function_tool(Search)]
        )
    sent = upstream.requests[0].body["tools"][0]["function"]
    assert sent["strict"] is True
    assert "default" not in sent["parameters"]["properties"]["limit"]
    assert sent["parameters"]["properties"]["limit"]["title"] == "Limit"


def test_invalid_arguments_are_corrected_then_parsed(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("Search", '{"city": "Turin", "limit": "3"}')]),
        Reply(tool_calls=[Call("Search", '{"city": "Turin", "limit": 3, "cuisine": "pizza"}')]),
    )
    with client(gw) as c:
        raw = c.chat.completions.with_raw_response.create(
            model="strict-model", messages=USER, tools=[openai.pydantic_function_tool(Search)]
        )
    assert raw.headers["x-syntic-schema-retries"] == "1"
    [call] = raw.parse().choices[0].message.tool_calls or []
    assert Search.model_validate_json(call.function.arguments).cuisine == "pizza"  # type: ignore[union-attr]


@pytest.mark.parametrize("model", ["strict-model"])
def test_anthropic_shaped_schema_is_refused_here_as_openai_does(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    from anthropic.lib._parse._transform import transform_schema

    tool = {
        "type": "function",
        "function": {"name": "search", "strict": True, "parameters": transform_schema(Search)},
    }
    with client(gw) as c, pytest.raises(openai.BadRequestError) as info:
        c.chat.completions.create(model=model, messages=USER, tools=[tool])  # type: ignore[list-item]
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == (
        "schema_not_strict",
        "tools[0].function.parameters.required",
    )
    assert upstream.requests == []
