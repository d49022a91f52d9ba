"""Refusals are answers: every client dialect x upstream wire, streamed and not, through the
official SDKs. An upstream's refusal (chat ``message.refusal`` / ``delta.refusal``, a
Responses ``refusal`` part and its events, Anthropic ``stop_reason: "refusal"``) reaches the
client as its dialect's refusal; under strict output or strict tools it is returned after
exactly one upstream call, never corrected into a 422."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gateway.canonical import DEFAULT_REFUSAL
from tests.support.dialect_clients import DIALECTS, Dialect, Seen, ask, strict_output
from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Reply, ScriptedUpstream
from tests.support.three_wires import start_three_wire_gateway

REFUSAL = "I can't help with that request."
WIRES = ("oa", "rs", "an")  # chat completions, Responses, Anthropic Messages upstreams


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_three_wire_gateway(scripted_upstream_server, tmp_path_factory.mktemp("refusals"))
    yield gw
    gw.stop()


def refusal_and_text(dialect: Dialect, seen: Seen) -> tuple[str | None, str | None, str]:
    """(the refusal, the text, how the turn ended) as the SDK's final object has them."""
    final = seen.final
    if dialect == "chat":
        choice = final.choices[0]
        # A stream's first chunk says ``content: ""`` before the upstream's answer is known.
        return choice.message.refusal, choice.message.content or None, choice.finish_reason
    if dialect == "responses":
        parts = [p for item in final.output if item.type == "message" for p in item.content]
        refusal = "".join(p.refusal for p in parts if p.type == "refusal") or None
        text = "".join(p.text for p in parts if p.type == "output_text") or None
        return refusal, text, final.status
    text = "".join(b.text for b in final.content if b.type == "text") or None
    return (REFUSAL if final.stop_reason == "refusal" else None), text, final.stop_reason


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "plain"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_refusal_reaches_every_dialect_as_its_refusal(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    dialect: Dialect,
    wire: str,
    stream: bool,
    strict: bool,
) -> None:
    calls = 2 if stream else 1  # a stream is read raw, then through the SDK's helper
    upstream.queue(*[Reply(refusal=REFUSAL, fragment=5) for _ in range(calls)])
    seen = ask(gw, dialect, wire, stream=stream, extra=strict_output(dialect) if strict else {})
    assert len(upstream.requests) == calls  # no correction call
    refusal, text, end = refusal_and_text(dialect, seen)
    if dialect == "messages":
        assert (refusal, text, end) == (REFUSAL, REFUSAL, "refusal")
    elif wire == "an" and stream and not strict:
        # Anthropic says it refused only at the end: the words went out as text already.
        assert (refusal, text) == (DEFAULT_REFUSAL, REFUSAL)
    else:
        assert (refusal, text) == (REFUSAL, None)
    if dialect == "chat":
        assert end == "stop"
    if dialect == "responses":
        assert end == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_anthropic_refusal_without_words_still_says_it_refused(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, stream: bool
) -> None:
    calls = 2 if stream else 1
    upstream.queue(*[Reply(refusal="") for _ in range(calls)])
    seen = ask(gw, dialect, "an", stream=stream, extra=strict_output(dialect))
    assert len(upstream.requests) == calls
    refusal, text, end = refusal_and_text(dialect, seen)
    if dialect == "messages":
        assert (text, end) == (None, "refusal")
    else:
        assert (refusal, text) == (DEFAULT_REFUSAL, None)


TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order": {"type": "string"}},
    "required": ["order"],
    "additionalProperties": False,
}


def strict_tool(dialect: Dialect) -> dict[str, Any]:
    if dialect == "chat":
        return {
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "lookup", "parameters": TOOL_SCHEMA, "strict": True},
                }
            ],
            "tool_choice": "required",
        }
    if dialect == "responses":
        return {
            "tools": [
                {"type": "function", "name": "lookup", "parameters": TOOL_SCHEMA, "strict": True}
            ],
            "tool_choice": "required",
        }
    return {
        "tools": [{"name": "lookup", "input_schema": TOOL_SCHEMA, "strict": True}],
        "tool_choice": {"type": "any"},
    }


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_refusal_under_strict_tools_is_an_answer(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect, wire: str, stream: bool
) -> None:
    calls = 2 if stream else 1
    upstream.queue(*[Reply(refusal=REFUSAL) for _ in range(calls)])
    seen = ask(gw, dialect, wire, stream=stream, extra=strict_tool(dialect))
    assert len(upstream.requests) == calls
    refusal, _, _ = refusal_and_text(dialect, seen)
    assert refusal in (REFUSAL, DEFAULT_REFUSAL)


@pytest.mark.parametrize("wire", WIRES)
def test_the_sdks_parse_helpers_see_the_refusal(
    gw: GatewayProcess, upstream: ScriptedUpstream, wire: str
) -> None:
    import anthropic
    import openai
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: str

    upstream.queue(*[Reply(refusal=REFUSAL) for _ in range(3)])
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as client:
        parsed = client.chat.completions.parse(
            model=wire, messages=[{"role": "user", "content": "x"}], response_format=Answer
        )
        message = parsed.choices[0].message
        assert (message.parsed, message.refusal) == (None, REFUSAL)
        response = client.responses.parse(model=wire, input="x", text_format=Answer, store=False)
        assert response.output_parsed is None
    with anthropic.Anthropic(
        base_url=gw.base_url, api_key=gw.api_key, max_retries=0
    ) as messages_client:
        reply = messages_client.messages.create(
            model=wire,
            max_tokens=64,
            messages=[{"role": "user", "content": "x"}],
            output_config={
                "format": {
                    "type": "json_schema",
                    "schema": Answer.model_json_schema() | {"additionalProperties": False},
                }
            },
        )
        assert reply.stop_reason == "refusal"
    assert len(upstream.requests) == 3
