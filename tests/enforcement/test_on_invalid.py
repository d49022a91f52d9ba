"""``on_invalid = "tool_error"`` (per model) and ``x-syntic-on-invalid`` (per request):
a strict call still invalid after its one correction, or a required call still missing, is
a 200 answer that says what went wrong, through each dialect's official SDK (every body and
event validated against the SDK's types), streamed and not, on every upstream wire. The
invalid arguments are never returned; ``x-syntic-on-invalid`` names the mode and the call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from gateway.settings import ConfigError, load_settings
from tests.dialects.test_preamble_hold import consume
from tests.support.dialect_clients import DIALECTS, Dialect, ask, strict_output
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream
from tests.support.tool_choice_clients import (
    BAD,
    LOOKUP,
    TEXT_END,
    TOOL_END,
    WIRES,
    answer,
    gw,
    status_error,
    tool_choice,
    tools,
)

__all__ = ["gw"]  # the module's gateway fixture

TOOL_ERROR = {"x-syntic-on-invalid": "tool_error"}
DROPPED = (
    "The gateway dropped a call to create_refund (tool_arguments_invalid): Arguments "
    "for create_refund did not match the schema: /amount_pence must be integer."
)


def request(dialect: Dialect, headers: dict[str, str] | None = None, **more: Any) -> dict[str, Any]:
    return {"tools": tools(dialect), "extra_headers": headers or {}, **more}


def twice(upstream: ScriptedUpstream, stream: bool, *steps: Reply) -> None:
    """Queue the steps (twice for a stream: ``ask`` reads it raw, then with the helper)."""
    upstream.queue(*steps, *(steps if stream else []))


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_call_still_invalid_is_a_text_answer_that_says_why(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool, wire: str
) -> None:
    twice(
        upstream,
        stream,
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    seen = ask(gw, dialect, f"{wire}-strict", stream=stream, extra=request(dialect, TOOL_ERROR))
    got = answer(dialect, seen.final)
    assert (got.text, got.calls, got.finish) == (DROPPED, [], TEXT_END[dialect])
    assert "12.50" not in json.dumps(seen.raw)  # the invalid arguments never leave
    assert seen.headers["x-syntic-on-invalid"] == "tool_error; dropped=create_refund"
    if not stream:
        assert seen.headers["x-syntic-schema-retries"] == "1"
    assert len(upstream.requests) == (4 if stream else 2)  # one correction per answer


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_model_setting_and_the_header_that_overrides_it(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    model = "an-tool-error" if dialect == "messages" else "ch-tool-error"
    twice(
        upstream,
        stream,
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    seen = ask(gw, dialect, model, stream=stream, extra=request(dialect))
    assert answer(dialect, seen.final).text == DROPPED
    upstream.reset()
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    with pytest.raises(
        (openai.UnprocessableEntityError, anthropic.UnprocessableEntityError)
    ) as info:
        ask(
            gw,
            dialect,
            model,
            stream=stream,
            extra=request(dialect, {"x-syntic-on-invalid": "error"}),
        )
    assert status_error(info.value).response.json()["error"]["code"] == "tool_arguments_invalid"
    assert "x-syntic-on-invalid" not in status_error(info.value).response.headers


@pytest.mark.parametrize("value", ["tool-error", "", "yes please"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_unknown_header_value_is_a_400_naming_the_header(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, value: str
) -> None:
    with pytest.raises((openai.BadRequestError, anthropic.BadRequestError)) as info:
        ask(
            gw,
            dialect,
            "ch-strict",
            stream=False,
            extra=request(dialect, {"x-syntic-on-invalid": value}),
        )
    body = status_error(info.value).response.json()
    assert (body["error"]["code"], body["error"]["param"]) == (
        "invalid_request",
        "x-syntic-on-invalid",
    )
    assert "must be one of error, tool_error" in body["error"]["message"]
    assert status_error(info.value).response.headers["x-should-retry"] == "false"
    assert upstream.requests == []


@pytest.mark.parametrize(("choice", "named"), [("required", "*"), ("named", "create_refund")])
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_required_call_still_missing_is_a_text_answer(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    dialect: Dialect,
    stream: bool,
    choice: Any,
    named: str,
) -> None:
    twice(upstream, stream, Reply(content=None), Reply(content="No."))
    seen = ask(
        gw,
        dialect,
        "an-strict",
        stream=stream,
        extra=request(dialect, TOOL_ERROR, tool_choice=tool_choice(dialect, choice)),
    )
    got = answer(dialect, seen.final)
    wanted = "a call to create_refund" if choice == "named" else "a tool call"
    assert got.text == (
        f"The gateway found no tool call (tool_call_missing): tool_choice "
        f"requires {wanted}, and the answer made none."
    )
    assert (got.calls, got.finish) == ([], TEXT_END[dialect])
    assert seen.headers["x-syntic-on-invalid"] == f"tool_error; missing={named}"


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_valid_calls_of_a_parallel_answer_stay(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    twice(
        upstream,
        stream,
        Reply(tool_calls=[Call("lookup_order", LOOKUP), Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    seen = ask(gw, dialect, "rs-strict", stream=stream, extra=request(dialect, TOOL_ERROR))
    got = answer(dialect, seen.final)
    assert got.calls == [("lookup_order", json.loads(LOOKUP))]
    assert got.text == DROPPED
    assert got.finish == TOOL_END[dialect]  # the agent still runs lookup_order
    assert "12.50" not in json.dumps(seen.raw)


@pytest.mark.parametrize(
    "way",
    [
        "chat.stream",
        "chat.create",
        "responses.stream",
        "responses.create",
        "messages.stream",
        "messages.create",
    ],
)
def test_after_text_streamed_the_words_follow_it(
    gw: GatewayProcess, upstream: ScriptedUpstream, way: str
) -> None:
    upstream.queue(
        Reply(content="One moment.", tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    dialect: Dialect = (
        "messages"
        if way.startswith("messages")
        else ("chat" if way.startswith("chat") else "responses")
    )
    out = consume(way, gw, "ch-strict", tools=tools(dialect), extra_headers=TOOL_ERROR)
    assert "".join(out.text) == "One moment.\n\n" + DROPPED  # no in-band error
    assert out.calls == []
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_strict_output_still_invalid_stays_a_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect
) -> None:
    upstream.queue(Reply(content="not json"), Reply(content="still not json"))
    with pytest.raises(
        (openai.UnprocessableEntityError, anthropic.UnprocessableEntityError)
    ) as info:
        ask(
            gw,
            dialect,
            "ch-tool-error",
            stream=False,
            extra={**strict_output(dialect), "extra_headers": TOOL_ERROR},
        )
    assert status_error(info.value).response.json()["error"]["code"] == "json_output_invalid"


def test_an_unknown_model_setting_stops_the_config(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('[[models]]\nname = "m"\nprovider = "openai"\non_invalid = "warn"\n')
    with pytest.raises(
        ConfigError,
        match=r"models\[0\]\.on_invalid must be one of "
        r"\['error', 'tool_error'\]",
    ):
        load_settings(config, env={})


def test_an_upstreams_tool_name_in_the_header_is_percent_encoded(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    # A call to a tool the request does not have, named to split the header if copied raw.
    evil = "x\r\nset-cookie: a=b,c"
    upstream.queue(Reply(tool_calls=[Call(evil, "{}")]), Reply(tool_calls=[Call(evil, "{}")]))
    seen = ask(gw, "chat", "ch-strict", stream=False, extra=request("chat", TOOL_ERROR))
    assert seen.headers["x-syntic-on-invalid"] == (
        "tool_error; dropped=x%0D%0Aset-cookie%3A%20a%3Db%2Cc"
    )
    assert "set-cookie" not in {k.lower() for k in seen.headers}
    assert answer("chat", seen.final).calls == []
