"""``openai-agents`` with its default model class (``OpenAIResponsesModel``, the Responses
API): an ``Agent`` with a ``function_tool`` run by ``Runner.run`` through the gateway."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from agents import (
    Agent,
    OpenAIResponsesModel,
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


async def run(gw: GatewayProcess, model: str) -> str:
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)
    agent = Agent(
        name="finder",
        instructions="Find places.",
        tools=[search],
        model=OpenAIResponsesModel(model=model, openai_client=client),
    )
    try:
        result = await Runner.run(agent, "Pizza in Turin")
    finally:
        await client.close()
    return str(result.final_output)


@pytest.mark.parametrize("model", ["strict-model", "an-strict"])
async def test_agent_runs_a_valid_call(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 3}')]),
        Reply(content="Found 3."),
    )
    assert await run(gw, model) == "Found 3."
    assert SEEN == [("Turin", 3)]


async def test_invalid_call_corrected_before_the_tool_runs(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin"}')]),  # "limit" missing
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 10}')]),
        Reply(content="Found 10."),
    )
    assert await run(gw, "strict-model") == "Found 10."
    assert SEEN == [("Turin", 10)]
    feedback = upstream.requests[1].body["messages"][-1]["content"]
    assert 'required property "limit"' in feedback
    # The agent sent the whole turn back as input items: the tool's output reached the model.
    last = upstream.requests[2].body["messages"]
    assert last[-1] == {
        "role": "tool",
        "tool_call_id": last[-2]["tool_calls"][0]["id"],
        "content": "10 places in Turin",
    }


async def test_still_invalid_fails_the_run_and_the_tool_never_runs(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    bad = Reply(tool_calls=[Call("search", '{"city": 7, "limit": 1}')])
    upstream.queue(bad, bad)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        await run(gw, "strict-model")
    assert info.value.code == "tool_arguments_invalid" and info.value.param == "/city"
    assert SEEN == []


async def test_streamed_run(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": "3"}')], fragment=4),
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 3}')]),
        Reply(content="Found 3 in Turin.", fragment=4),
    )
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)
    agent = Agent(
        name="finder",
        instructions="Find places.",
        tools=[search],
        model=OpenAIResponsesModel(model="strict-model", openai_client=client),
    )
    try:
        result = Runner.run_streamed(agent, "Pizza in Turin")
        kinds = [event.type async for event in result.stream_events()]
    finally:
        await client.close()
    assert result.final_output == "Found 3 in Turin."
    assert SEEN == [("Turin", 3)]  # the corrected call, never the invalid one
    assert "raw_response_event" in kinds


async def test_chained_by_previous_response_id(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """``auto_previous_response_id``: each turn sends only its new items and names the
    last response; the gateway's stored responses supply the rest."""
    upstream.queue(
        Reply(tool_calls=[Call("search", '{"city": "Turin", "limit": 2}')]),
        Reply(content="Found 2."),
    )
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)
    agent = Agent(
        name="finder",
        instructions="Find places.",
        tools=[search],
        model=OpenAIResponsesModel(model="strict-model", openai_client=client),
    )
    try:
        result = await Runner.run(agent, "Pizza in Turin", auto_previous_response_id=True)
        first, last = (r.response_id for r in result.raw_responses)
        assert first is not None and last is not None
        stored = await client.responses.retrieve(last)
    finally:
        await client.close()
    assert stored.previous_response_id == first  # the agent chained, the gateway continued
    assert result.final_output == "Found 2." and SEEN == [("Turin", 2)]
    second = upstream.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[-1]["content"] == "2 places in Turin"
