"""``openai-agents``: a ``function_tool`` with a defaulted argument (strict schema with
``default``) run by an agent through the gateway's chat completions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

SEEN: list[tuple[str, int]] = []


@function_tool
def search(city: str, limit: int = 10) -> str:
    """Search places in a city.

    Args:
        city: The city.
        limit: How many places.
    """
    SEEN.append((city, limit))
    return f"{limit} places in {city}"


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would upload traces: loopback only here
    SEEN.clear()
    yield


def run(gw: GatewayProcess, model: str) -> str:
    # Runner.run on a loop of its own: run_sync keeps the thread's default loop after
    # shutting down its async generators, so the next run there (any library's) warns.
    return asyncio.run(_run(gw, model))


async def _run(gw: GatewayProcess, model: str) -> str:
    async with openai.AsyncOpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0
    ) as client:
        agent = Agent(
            name="finder",
            instructions="Find places.",
            tools=[search],
            model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        )
        return str((await Runner.run(agent, "Pizza in Turin")).final_output)


def test_function_tool_with_a_default(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    assert search.strict_json_schema
    assert search.params_json_schema["properties"]["limit"]["default"] == 10  # emitted
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 3}')]),
        Reply(content="Found 3."),
    )
    assert run(gw, "strict-model") == "Found 3."
    assert SEEN == [("Turin", 3)]
    sent = upstream.requests[0].body["tools"][0]["function"]
    assert sent["parameters"]["properties"]["limit"]["default"] == 10  # the client's schema


def test_invalid_call_corrected_before_the_tool_runs(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin"}')]),  # "limit" missing
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 10}')]),
        Reply(content="Found 10."),
    )
    assert run(gw, "strict-model") == "Found 10."
    assert SEEN == [("Turin", 10)]
    feedback = upstream.requests[1].body["messages"][-1]["content"]
    assert 'required property "limit"' in feedback


def test_constrained_upstream_gets_strict_without_default(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 1}')]),
        Reply(content="Found 1."),
    )
    assert run(gw, "constrained-model") == "Found 1."
    sent = upstream.requests[0].body["tools"][0]["function"]
    assert sent["strict"] is True
    assert "default" not in sent["parameters"]["properties"]["limit"]
