"""Stored responses: ``store`` (the default) keeps a response for its key;
``previous_response_id`` continues from it; ``retrieve`` / ``delete`` for that key only;
another key's id, a deleted one and an unstored one are 404."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.responses.test_create import REFUND
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

GOOD = '{"order_id": "A1", "amount_pence": 1250}'


def other_client(gw: GatewayProcess, name: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.create_key(name), max_retries=0, timeout=20
    )


@pytest.mark.parametrize("model", ["strict-model", "an-strict"])
def test_continue_a_tool_call_with_previous_response_id(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", GOOD, id="call_r1")]),
        Reply(content="Refunded 12.50."),
    )
    first = client.responses.create(
        model=model,
        input="Refund A1",
        instructions="Be kind.",
        tools=[REFUND],  # type: ignore[list-item]
    )
    [call] = first.output
    assert call.type == "function_call" and call.call_id == "call_r1"
    second = client.responses.create(
        model=model,
        previous_response_id=first.id,
        tools=[REFUND],  # type: ignore[list-item]
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "done"}],
    )
    assert second.output_text == "Refunded 12.50."
    assert second.previous_response_id == first.id and second.instructions is None
    sent = upstream.requests[1].body
    if model == "strict-model":  # chat completions upstream
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
        assert sent["messages"][1]["tool_calls"][0]["id"] == "call_r1"
        assert sent["messages"][2] == {"role": "tool", "tool_call_id": "call_r1", "content": "done"}
    else:  # Messages upstream
        assert "system" not in sent  # instructions are not carried over
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
        assert sent["messages"][1]["content"][0]["id"] == "call_r1"
        assert sent["messages"][2]["content"][0]["tool_use_id"] == "call_r1"


def test_a_chain_carries_every_earlier_turn(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="one"), Reply(content="two"), Reply(content="three"))
    a = client.responses.create(model="strict-model", input="1")
    b = client.responses.create(model="strict-model", input="2", previous_response_id=a.id)
    client.responses.create(model="strict-model", input="3", previous_response_id=b.id)
    sent = upstream.requests[2].body["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "1"),
        ("assistant", "one"),
        ("user", "2"),
        ("assistant", "two"),
        ("user", "3"),
    ]


def test_retrieve_and_delete_for_the_key_that_made_it(
    client: openai.OpenAI, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="kept"))
    made = client.responses.create(model="strict-model", input="keep this", metadata={"k": "v"})
    got = client.responses.retrieve(made.id)
    assert got.model_dump() == made.model_dump()
    with other_client(gw, "other-retrieve") as other:
        with pytest.raises(openai.NotFoundError) as info:
            other.responses.retrieve(made.id)
        assert info.value.code == "response_not_found"
        with pytest.raises(openai.NotFoundError):
            other.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError) as info:
            other.responses.create(model="strict-model", input="x", previous_response_id=made.id)
        assert info.value.param == "previous_response_id"
    assert client.responses.retrieve(made.id).id == made.id  # untouched by the other key
    client.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(made.id)
    assert len(upstream.requests) == 1  # the refused continuation called no model


def test_store_false_is_not_kept(client: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="gone"))
    made = client.responses.create(model="strict-model", input="x", store=False)
    assert made.model_extra is not None and made.model_extra["store"] is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)


def test_a_streamed_response_is_stored_before_completed(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="streamed", fragment=3), Reply(content="next"))
    with client.responses.stream(model="strict-model", input="go") as stream:
        for event in stream:
            if event.type == "response.completed":
                # Read before the stream ends: already stored.
                assert client.responses.retrieve(event.response.id).output_text == "streamed"
        final = stream.get_final_response()
    client.responses.create(model="strict-model", input="more", previous_response_id=final.id)
    assert [m["content"] for m in upstream.requests[1].body["messages"]] == [
        "go",
        "streamed",
        "more",
    ]


def _gateway_with(
    name: str,
    server: dict[str, Any],
    upstream: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    gw = start_gateway(
        tmp_path_factory.mktemp(name),
        [model_table("strict-model", upstream.base_url)],
        server=server,
    )
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def short_retention(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    yield from _gateway_with(
        "retention", {"responses_retention_s": 1.0}, scripted_upstream_server, tmp_path_factory
    )


def test_an_expired_response_is_not_served(
    short_retention: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="brief"))
    headers = {"authorization": f"Bearer {short_retention.api_key}"}
    url = short_retention.base_url + "/v1/responses"
    made = httpx.post(url, json={"model": "strict-model", "input": "x"}, headers=headers)
    rid = made.json()["id"]
    expires = _row(short_retention, rid, "expires_at")
    served = httpx.get(f"{url}/{rid}", headers=headers).status_code
    # Served until it expires; a loaded machine may only ask after the second is over.
    assert served == 200 or time.time() > expires
    while time.time() <= expires:
        time.sleep(expires - time.time() + 0.01)
    gone = httpx.get(f"{url}/{rid}", headers=headers)
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "response_not_found"
    again = httpx.post(
        url,
        json={"model": "strict-model", "input": "y", "previous_response_id": rid},
        headers=headers,
    )
    assert again.status_code == 404 and again.json()["error"]["param"] == "previous_response_id"


def _row(gw: GatewayProcess, rid: str, column: str) -> Any:
    db = Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        [(value,)] = conn.execute(f"SELECT {column} FROM responses WHERE id = ?", (rid,)).fetchall()
    return value


def test_stored_rows_are_in_the_responses_table(
    client: openai.OpenAI, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="row"))
    made = client.responses.create(model="strict-model", input="x")
    items, body = _row(gw, made.id, "input_items"), _row(gw, made.id, "response")
    assert json.loads(items) == [{"type": "message", "role": "user", "content": "x"}]
    assert json.loads(body)["output"][0]["content"][0]["text"] == "row"


@pytest.fixture(scope="module")
def small_history(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    yield from _gateway_with(
        "history", {"responses_max_history_bytes": 4096}, scripted_upstream_server, tmp_path_factory
    )


def test_a_conversation_past_its_size_limit_is_not_continued(
    small_history: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    client = openai.OpenAI(
        base_url=small_history.base_url + "/v1",
        api_key=small_history.api_key,
        max_retries=0,
        timeout=20,
    )
    turn = "x" * 1000
    upstream.queue(*(Reply(content=turn) for _ in range(3)))
    first = client.responses.create(model="strict-model", input=turn)
    second = client.responses.create(
        model="strict-model", input=turn, previous_response_id=first.id
    )  # ~3 KB stored before
    assert second.output_text == turn
    assert _row(small_history, second.id, "input_items").count(turn) == 1  # its own input
    assert _row(small_history, second.id, "previous_id") == first.id
    calls = len(upstream.requests)
    with pytest.raises(openai.BadRequestError) as refused:  # ~5 KB stored before
        client.responses.create(model="strict-model", input="more", previous_response_id=second.id)
    error = refused.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("conversation_too_large", "previous_response_id")
    assert "4096" in error["message"] and second.id in error["message"]
    assert len(upstream.requests) == calls  # refused before any upstream call
    fresh = client.responses.create(model="strict-model", input="a new start")
    assert fresh.output_text == turn


def test_the_size_limit_counts_bytes_not_characters(
    small_history: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    client = openai.OpenAI(
        base_url=small_history.base_url + "/v1",
        api_key=small_history.api_key,
        max_retries=0,
        timeout=20,
    )
    turn = "é" * 1000  # two bytes each in UTF-8: ~2.6 k characters stored, ~4.6 KB
    upstream.queue(Reply(content=turn))
    first = client.responses.create(model="strict-model", input=turn)
    stored = _row(small_history, first.id, "input_items") + _row(
        small_history, first.id, "response"
    )
    assert len(stored) < 4096 < len(stored.encode())
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="strict-model", input="more", previous_response_id=first.id)
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "conversation_too_large"


def test_a_continuation_stores_only_what_is_new(
    client: openai.OpenAI, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    turn = "y" * 2000
    upstream.queue(*(Reply(content=turn) for _ in range(6)))
    ids = [client.responses.create(model="strict-model", input=turn).id]
    for _ in range(5):
        ids.append(
            client.responses.create(
                model="strict-model", input=turn, previous_response_id=ids[-1]
            ).id
        )
    sizes = [_row(gw, rid, "size_bytes") for rid in ids]
    # A copy of the conversation per turn would grow each row by ~4 KB a turn.
    assert max(sizes) < 1.2 * min(sizes) and min(sizes) > 4000
    assert [_row(gw, rid, "previous_id") for rid in ids] == [None, *ids[:-1]]
    sent = upstream.requests[-1].body["messages"]
    assert len(sent) == 11 and all(m["content"] == turn for m in sent)


def test_a_deleted_earlier_turn_still_carries_the_later_ones(
    client: openai.OpenAI, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="one"), Reply(content="two"), Reply(content="three"))
    a = client.responses.create(model="strict-model", input="1")
    b = client.responses.create(model="strict-model", input="2", previous_response_id=a.id)
    client.responses.delete(a.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(a.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="strict-model", input="x", previous_response_id=a.id)
    client.responses.create(model="strict-model", input="3", previous_response_id=b.id)
    sent = upstream.requests[-1].body["messages"]
    assert [m["content"] for m in sent] == ["1", "one", "2", "two", "3"]


@pytest.fixture(scope="module")
def small_quota(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    yield from _gateway_with(
        "quota", {"responses_max_bytes_per_key": 4096}, scripted_upstream_server, tmp_path_factory
    )


def test_a_key_past_its_stored_bytes_quota_cannot_store_more(
    small_quota: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    client = openai.OpenAI(
        base_url=small_quota.base_url + "/v1",
        api_key=small_quota.api_key,
        max_retries=0,
        timeout=20,
    )
    turn = "z" * 3000
    upstream.queue(Reply(content=turn), Reply(content="not kept"))
    first = client.responses.create(model="strict-model", input=turn)  # ~6 KB kept
    calls = len(upstream.requests)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="strict-model", input="more")
    error = refused.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("stored_responses_quota_exceeded", "store")
    assert "4096" in error["message"]
    assert len(upstream.requests) == calls  # refused before any upstream call
    unkept = client.responses.create(
        model="strict-model", input="more", store=False, previous_response_id=first.id
    )
    assert unkept.output_text == "not kept"
    with other_client(small_quota, "quota-other") as other:  # the quota is per key
        upstream.queue(Reply(content="theirs"))
        assert other.responses.create(model="strict-model", input="x").output_text == "theirs"
    client.responses.delete(first.id)
    upstream.queue(Reply(content="room again"))
    assert client.responses.create(model="strict-model", input="x").output_text == "room again"
