"""``anthropic``: ``transform_schema`` tools (optional fields outside ``required``, a
recursive model's root ``$ref``) and ``messages.parse(output_format=...)`` on /v1/messages."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pydantic
import pytest
from anthropic.lib._parse._transform import transform_schema

from tests.clients.models import Bookmark, Search, TreeNode
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

USER: list[Any] = [{"role": "user", "content": "Pizza in Turin, please."}]


def client(gw: GatewayProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0)


def tool(model: type[pydantic.BaseModel]) -> Any:
    return {"name": model.__name__, "strict": True, "input_schema": transform_schema(model)}


@pytest.mark.parametrize("model", ["oa-strict", "an-strict"])
def test_transform_schema_with_optional_fields(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    assert transform_schema(Search)["required"] == ["city"]  # what the SDK emits
    upstream.queue(Reply(tool_calls=[Call("Search", '{"city": "Turin"}')]))
    with client(gw) as c:
        msg = c.messages.create(model=model, max_tokens=256, messages=USER, tools=[tool(Search)])
    [block] = [b for b in msg.content if b.type == "tool_use"]
    assert Search.model_validate(block.input) == Search(city="Turin")


def test_transform_schema_of_a_recursive_model(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    assert "$ref" in transform_schema(TreeNode)  # a root $ref into $defs
    args = {"name": "root", "children": [{"name": "leaf"}]}
    upstream.queue(Reply(tool_calls=[Call("TreeNode", json.dumps(args))]))
    with client(gw) as c:
        msg = c.messages.create(
            model="an-strict", max_tokens=256, messages=USER, tools=[tool(TreeNode)]
        )
    [block] = [b for b in msg.content if b.type == "tool_use"]
    assert TreeNode.model_validate(block.input).children[0].name == "leaf"


def test_optional_field_with_a_wrong_type_is_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("Search", '{"city": "Turin", "limit": "3"}')]),
        Reply(tool_calls=[Call("Search", '{"city": "Turin", "limit": 3}')]),
    )
    with client(gw) as c:
        raw = c.messages.with_raw_response.create(
            model="oa-strict", max_tokens=256, messages=USER, tools=[tool(Search)]
        )
    assert raw.headers["x-syntic-schema-retries"] == "1"
    [block] = [b for b in raw.parse().content if b.type == "tool_use"]
    assert block.input == {"city": "Turin", "limit": 3}


def test_messages_parse_output_format(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content='{"city": "Turin", "limit": 2}'))
    with client(gw) as c:
        parsed = c.messages.parse(
            model="oa-strict", max_tokens=256, messages=USER, output_format=Search
        )
    assert parsed.parsed_output == Search(city="Turin", limit=2)
    sent = upstream.requests[0].body
    assert sent["response_format"]["json_schema"]["schema"]["required"] == ["city"]


def test_http_url_field_uses_the_uri_format(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    assert transform_schema(Bookmark)["properties"]["url"]["format"] == "uri"
    upstream.queue(
        Reply(tool_calls=[Call("Bookmark", '{"url": "not a url"}')]),
        Reply(tool_calls=[Call("Bookmark", '{"url": "https://example.org/a"}')]),
    )
    with client(gw) as c:
        raw = c.messages.with_raw_response.create(
            model="an-strict", max_tokens=256, messages=USER, tools=[tool(Bookmark)]
        )
    assert raw.headers["x-syntic-schema-retries"] == "1"  # the format is enforced
    [block] = [b for b in raw.parse().content if b.type == "tool_use"]
    assert block.input == {"url": "https://example.org/a"}
    # OpenAI's strict mode has no "uri" format: chat completions refuses it, with the path.
    oa_tool = {
        "type": "function",
        "function": {
            "name": "b",
            "strict": True,
            "parameters": openai.pydantic_function_tool(Bookmark)["function"]["parameters"],
        },
    }
    with (
        openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as oc,
        pytest.raises(openai.BadRequestError) as info,
    ):
        oc.chat.completions.create(model="strict-model", messages=USER, tools=[oa_tool])  # type: ignore[list-item]
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == (
        "invalid_tool_schema",
        "tools[0].function.parameters.properties.url.format",
    )
