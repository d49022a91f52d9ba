"""``client.responses.stream`` / ``create(stream=True)``: the Responses event sequence, text
as it comes, a strict call's arguments held back until valid (never an invalid fragment on
the wire), and a failure after the start as ``response.failed`` + ``error``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.dialects.test_openai_stream_e2e import ledger_row
from tests.responses.test_create import REFUND
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

BAD = '{"order_id": "A1", "amount_pence": "12.50"}'
GOOD = '{"order_id": "A1", "amount_pence": 1250}'


def raw_events(gw: GatewayProcess, **kw: Any) -> tuple[httpx.Response, list[dict[str, Any]]]:
    body = {"model": "strict-model", "input": "Refund A1", "tools": [REFUND], "stream": True, **kw}
    answer = httpx.post(
        gw.base_url + "/v1/responses",
        json=body,
        timeout=20,
        headers={"authorization": f"Bearer {gw.api_key}"},
    )
    events = []
    for block in answer.content.decode().split("\n\n"):
        lines = dict(
            line.split(": ", 1)
            for line in block.splitlines()
            if ": " in line and not line.startswith(":")
        )
        if "data" in lines:
            data = orjson.loads(lines["data"])
            assert lines["event"] == data["type"]
            events.append(data)
    return answer, events


@pytest.mark.parametrize("model", ["strict-model", "an-strict"])
def test_stream_text_then_call_through_the_sdk(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(
            content="Refunding now.",
            tool_calls=[Call("create_refund", GOOD)],
            fragment=4,
            usage=(20, 6),
        )
    )
    deltas = []
    with client.responses.stream(model=model, input="Refund A1", tools=[REFUND]) as stream:  # type: ignore[list-item]
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert "".join(deltas) == "Refunding now." and len(deltas) > 1  # text flows in pieces
    message, call = final.output
    assert message.type == "message" and final.output_text == "Refunding now."
    assert call.type == "function_call" and json.loads(call.arguments)["amount_pence"] == 1250
    assert final.status == "completed"
    assert final.usage is not None and final.usage.total_tokens == 26


def test_event_sequence_and_numbers(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="Hi", tool_calls=[Call("create_refund", GOOD)]))
    answer, events = raw_events(gw)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    created = events[0]["response"]
    assert created["status"] == "in_progress" and created["output"] == []
    done = events[-1]["response"]
    assert done["id"] == created["id"] and done["status"] == "completed"
    assert [i["type"] for i in done["output"]] == ["message", "function_call"]
    assert done["usage"]["schema_retries"] == 0


def test_raw_sse_never_carries_invalid_arguments(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)], fragment=5),
        Reply(tool_calls=[Call("create_refund", GOOD)]),
    )
    answer, events = raw_events(gw)
    assert b"12.50" not in answer.content
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert "".join(deltas) == GOOD
    completed = events[-1]["response"]
    assert completed["usage"]["schema_retries"] == 1
    assert json.loads(completed["output"][0]["arguments"])["amount_pence"] == 1250
    row = ledger_row(gw, answer.headers["x-request-id"])
    assert (row["streamed"], row["schema_retries"], row["endpoint"]) == (1, 1, "/v1/responses")


def test_invalid_twice_is_response_failed_then_an_error(
    client: openai.OpenAI, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(content="Let me see.", tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    answer, events = raw_events(gw)
    assert b"12.50" not in answer.content
    failed, error = events[-2:]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "tool_arguments_invalid"
    assert error["type"] == "error" and error["code"] == "tool_arguments_invalid"
    assert error["error"]["param"] == "/amount_pence"  # the unified envelope
    assert error["request_id"] == answer.headers["x-request-id"]
    assert not any(e["type"] == "response.completed" for e in events)
    upstream.queue(
        Reply(content="Let me see.", tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    with (
        pytest.raises(openai.APIError) as info,
        client.responses.stream(
            model="strict-model",
            input="Refund A1",
            tools=[REFUND],  # type: ignore[list-item]
        ) as stream,
    ):
        for _event in stream:
            pass
    assert type(info.value) is openai.APIError  # in band: no HTTP status to go by
    assert info.value.code == "tool_arguments_invalid"
    assert info.value.param == "/amount_pence"


def test_invalid_twice_before_any_output_is_a_plain_422(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    with (
        pytest.raises(openai.UnprocessableEntityError) as info,
        client.responses.stream(
            model="strict-model",
            input="Refund A1",
            tools=[REFUND],  # type: ignore[list-item]
        ) as stream,
    ):
        for _event in stream:
            pass
    assert info.value.response.headers["x-should-retry"] == "false"
    assert (info.value.code, info.value.param) == ("tool_arguments_invalid", "/amount_pence")
    assert len(upstream.requests) == 2


def test_bad_schema_is_an_http_400_before_any_event(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    loose = {**REFUND, "parameters": {"type": "object", "properties": {}}}
    answer, _ = raw_events(gw, tools=[loose])
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "tools[0].parameters"
    assert upstream.requests == []


def test_length_cut_is_response_incomplete(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="Once upon a", finish_reason="length"))
    _, events = raw_events(gw, tools=None)
    last = events[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert last["response"]["output"][0]["status"] == "incomplete"
