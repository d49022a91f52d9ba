"""``langchain-openai``: ``bind_tools(..., strict=True)`` with an ``Optional[X] = None``
field (``default: null``) is accepted; its recursive model (``items: {}``) is refused
with the path, as OpenAI refuses it."""

from __future__ import annotations

import openai
import pydantic
import pytest
from langchain_openai import ChatOpenAI

from tests.clients.models import TreeNode
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream


class Lookup(pydantic.BaseModel):
    """Look up an order."""

    order: str
    note: str | None = None


def chat(gw: GatewayProcess) -> ChatOpenAI:
    return ChatOpenAI(
        model="strict-model",
        base_url=gw.base_url + "/v1",
        api_key=gw.api_key,  # type: ignore[arg-type]
        max_retries=0,
    )


def test_strict_tool_with_an_optional_default(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(tool_calls=[Call("Lookup", '{"order": "582131", "note": null}')]))
    message = chat(gw).bind_tools([Lookup], strict=True).invoke("Where is order 582131?")
    assert message.tool_calls[0]["args"] == {"order": "582131", "note": None}
    sent = upstream.requests[0].body["tools"][0]["function"]["parameters"]
    assert sent["properties"]["note"]["default"] is None  # what LangChain emits


def test_recursive_model_with_empty_items_is_refused(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(gw).bind_tools([TreeNode], strict=True).invoke("Make a tree.")
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == (
        "schema_not_strict",
        "tools[0].function.parameters.properties.children.items",
    )
    assert upstream.requests == []
