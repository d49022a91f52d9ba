"""``pydantic-ai``: strict tools and structured output through the gateway's chat
completions (``OpenAIChatModel`` on an OpenAI-compatible base URL). pydantic-ai projects
its schemas itself (every property required, ``default`` dropped, recursion as
``$ref: "#"``), and the gateway takes them as they are."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
from pydantic_ai import Agent, Tool
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.clients.models import TreeNode
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream


def ask(gw: GatewayProcess, prompt: str, **agent: Any) -> Any:
    """One agent run's output, on a loop of its own with its own client, closed there
    (``run_sync`` leaves the thread's default loop and the client's connections open)."""

    async def run() -> Any:
        async with openai.AsyncOpenAI(
            base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0
        ) as client:
            model = OpenAIChatModel("strict-model", provider=OpenAIProvider(openai_client=client))
            return (await Agent(model, **agent).run(prompt)).output

    return asyncio.run(run())


def test_strict_tool_with_a_default(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    seen: list[tuple[str, int]] = []

    def search(city: str, limit: int = 10) -> str:
        """Search places in a city."""
        seen.append((city, limit))
        return f"{limit} places"

    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": "3"}')]),  # corrected
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 3}')]),
        Reply(content="Three places."),
    )
    assert ask(gw, "Pizza in Turin", tools=[Tool(search, strict=True)]) == "Three places."
    assert seen == [("Turin", 3)]
    sent = upstream.requests[0].body["tools"][0]["function"]["parameters"]
    assert sent["required"] == ["city", "limit"]  # what pydantic-ai emits for strict
    assert len(upstream.requests) == 3  # first call, its correction, the final answer


def test_recursive_structured_output(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    tree = {"name": "root", "children": [{"name": "leaf", "children": []}]}
    upstream.queue(Reply(tool_calls=[Call("final_result", json.dumps(tree))]))
    assert ask(gw, "Make a tree.", output_type=TreeNode) == TreeNode.model_validate(tree)
    sent = upstream.requests[0].body["tools"][0]["function"]["parameters"]
    assert sent["properties"]["children"]["items"] == {"$ref": "#"}
