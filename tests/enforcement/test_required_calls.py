"""Required calls are required: on a strict request, ``tool_choice`` asking for a call
("required", ``{"type": "any"}``) or naming a tool makes an answer without that call
invalid, through each dialect's official SDK, streamed and not, on every upstream wire:
one correction, then ``422 tool_call_missing`` (``x-should-retry: false``); never a 200
without the call."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tests.dialects.test_preamble_hold import consume
from tests.support.dialect_clients import DIALECTS, Dialect, ask
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, RecordedRequest, Reply, ScriptedUpstream
from tests.support.tool_choice_clients import (
    BAD,
    GOOD,
    LOOKUP,
    TEXT_END,
    TOOL_END,
    WIRES,
    Choice,
    answer,
    gw,
    status_error,
    tool_choice,
    tools,
)

__all__ = ["gw"]  # the module's gateway fixture

CHOICES: list[Choice] = ["required", "named"]
WAY_DIALECT: dict[str, Dialect] = {"chat": "chat", "responses": "responses", "messages": "messages"}


def strict(dialect: Dialect, choice: Choice, *, strict_tool: bool = True) -> dict[str, Any]:
    return {
        "tools": tools(dialect, strict=strict_tool),
        "tool_choice": tool_choice(dialect, choice),
    }


def assert_missing(exc: BaseException, choice: Choice) -> None:
    """A plain 422 ``tool_call_missing`` pointing at ``tool_choice``, not to be retried."""
    response = status_error(exc).response
    assert response.status_code == 422
    assert response.headers["x-should-retry"] == "false"
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert (body["error"]["code"], body["error"]["param"]) == ("tool_call_missing", "tool_choice")
    wanted = "a call to create_refund" if choice == "named" else "a tool call"
    assert body["error"]["message"] == f"tool_choice requires {wanted}, and the answer made none."


def forced_upstream(request: RecordedRequest, choice: Choice) -> bool:
    """Whether the upstream request's ``tool_choice`` asks for a call (the named one)."""
    sent = request.body.get("tool_choice")
    if choice == "named":
        return "create_refund" in json.dumps(sent)
    return sent in ("required", {"type": "any"}) or (
        isinstance(sent, dict) and sent.get("type") == "any"
    )


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_call_is_corrected_once_then_a_422(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    dialect: Dialect,
    stream: bool,
    choice: Choice,
    wire: str,
) -> None:
    # Streamed, the answer shows nothing before it is known to lack the call: a plain 422.
    upstream.queue(
        Reply(content=None if stream else "I would rather explain."),
        Reply(content="Still no call."),
    )
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as info:
        ask(gw, dialect, f"{wire}-strict", stream=stream, extra=strict(dialect, choice))
    assert_missing(info.value, choice)
    assert len(upstream.requests) == 2  # the answer and its one correction, no SDK retry
    correction = upstream.requests[1]
    assert not correction.body.get("stream")
    assert "Your reply made no tool call" in correction.raw.decode()
    assert forced_upstream(correction, choice)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_missing_call_is_corrected(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    dialect: Dialect,
    stream: bool,
    choice: Choice,
    wire: str,
) -> None:
    steps = [Reply(content=None), Reply(tool_calls=[Call("create_refund", GOOD)])]
    upstream.queue(*steps, *(steps if stream else []))  # a stream is asked twice (``ask``)
    seen = ask(gw, dialect, f"{wire}-strict", stream=stream, extra=strict(dialect, choice))
    got = answer(dialect, seen.final)
    assert got.calls == [("create_refund", json.loads(GOOD))]
    assert got.finish == TOOL_END[dialect]
    assert len(upstream.requests) == (4 if stream else 2)


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
def test_text_already_streamed_then_no_call_is_the_in_band_error(
    gw: GatewayProcess, upstream: ScriptedUpstream, way: str
) -> None:
    upstream.queue(Reply(content="Let me think."), Reply(content="No."))
    dialect = WAY_DIALECT[way.split(".")[0]]
    seen: list[str] = []
    with pytest.raises((openai.APIError, anthropic.APIError)) as info:
        consume(way, gw, "ch-strict", on_text=seen.append, **strict(dialect, "required"))
    assert "".join(seen) == "Let me think."
    exc = info.value
    if isinstance(exc, anthropic.APIStatusError):
        body: Any = exc.body
        assert body["error"]["code"] == "tool_call_missing"
    else:
        assert isinstance(exc, openai.APIError) and exc.code == "tool_call_missing"
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_call_to_another_tool_than_the_named_one_is_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    steps = [
        Reply(tool_calls=[Call("lookup_order", LOOKUP)]),
        Reply(tool_calls=[Call("create_refund", GOOD)]),
    ]
    upstream.queue(*steps, *(steps if stream else []))
    seen = ask(gw, dialect, "ch-strict", stream=stream, extra=strict(dialect, "named"))
    got = answer(dialect, seen.final)
    assert got.calls == [("create_refund", json.loads(GOOD))]  # lookup_order never shown
    feedback = upstream.requests[1].raw.decode()
    assert "The call to lookup_order is not the call this request requires" in feedback
    assert forced_upstream(upstream.requests[1], "named")


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_another_tool_again_after_the_correction_is_a_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("lookup_order", LOOKUP)]),
        Reply(tool_calls=[Call("lookup_order", LOOKUP)]),
    )
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as info:
        ask(gw, dialect, "an-strict", stream=stream, extra=strict(dialect, "named"))
    assert_missing(info.value, "named")
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_invalid_call_from_the_correction_is_tool_arguments_invalid(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect
) -> None:
    upstream.queue(Reply(content="Hmm."), Reply(tool_calls=[Call("create_refund", BAD)]))
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as info:
        ask(gw, dialect, "rs-strict", stream=False, extra=strict(dialect, "required"))
    body = status_error(info.value).response.json()
    assert (body["error"]["code"], body["error"]["param"]) == (
        "tool_arguments_invalid",
        "/amount_pence",
    )
    assert len(upstream.requests) == 2  # not corrected a second time


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_cut_off_answer_is_not_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect
) -> None:
    upstream.queue(Reply(content="Let me explain at length", finish_reason="length"))
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as info:
        ask(gw, dialect, "ch-strict", stream=False, extra=strict(dialect, "named"))
    body = status_error(info.value).response.json()
    assert body["error"]["code"] == "tool_call_missing"
    assert "raise max_tokens" in body["error"]["message"]
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_refusal_is_an_answer(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    steps = [Reply(refusal="I can't help with refunds.")]
    upstream.queue(*steps, *(steps if stream else []))
    ask(gw, dialect, "ch-strict", stream=stream, extra=strict(dialect, "required"))
    assert len(upstream.requests) == (2 if stream else 1)  # never corrected


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_request_that_is_not_strict_is_the_upstreams_word(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    steps = [Reply(content="No tool today.")]
    upstream.queue(*steps, *(steps if stream else []))
    seen = ask(
        gw,
        dialect,
        "ch-strict",
        stream=stream,
        extra=strict(dialect, "required", strict_tool=False),
    )
    got = answer(dialect, seen.final)
    assert (got.text, got.calls, got.finish) == ("No tool today.", [], TEXT_END[dialect])
    assert len(upstream.requests) == (2 if stream else 1)


def refusal_of(dialect: Dialect, final: Any) -> str | None:
    """The refusal an SDK's final object carries, as each dialect spells one."""
    if dialect == "chat":
        refusal: str | None = final.choices[0].message.refusal
        return refusal
    if dialect == "responses":
        parts = [p for item in final.output if item.type == "message" for p in item.content]
        return next((p.refusal for p in parts if p.type == "refusal"), None)
    if final.stop_reason != "refusal":
        return None
    return "".join(b.text for b in final.content if b.type == "text")


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_refusal_from_the_correction_is_the_answer(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    steps = [Reply(content=None), Reply(refusal="I won't refund this order.")]
    upstream.queue(*steps, *(steps if stream else []))
    seen = ask(gw, dialect, "ch-strict", stream=stream, extra=strict(dialect, "required"))
    assert refusal_of(dialect, seen.final) == "I won't refund this order."
    assert answer(dialect, seen.final).calls == []
    assert len(upstream.requests) == (4 if stream else 2)
