"""What the required-call and ``on_invalid`` tests share: a gateway in front of the scripted
upstream on every wire, the tools and ``tool_choice`` each dialect spells, and what a
client's SDK made of an answer (its text, its calls, how it ended)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import openai
import pytest

from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.dialect_clients import Dialect
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.responses_wire import ResponsesRenderer
from tests.support.scripted_upstream import ScriptedUpstream

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
    },
    "required": ["order_number", "amount_pence"],
    "additionalProperties": False,
}
LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_number": {"type": "string"}},
    "required": ["order_number"],
}
GOOD = '{"order_number": "582131", "amount_pence": 1250}'
BAD = '{"order_number": "582131", "amount_pence": "12.50"}'
LOOKUP = '{"order_number": "582131"}'
WIRES = ["ch", "an", "rs"]  # the upstream speaks chat completions, Messages, Responses
Choice = Literal["required", "named"]


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """``<wire>-strict`` per upstream wire, and ``ch-tool-error`` with ``on_invalid``."""
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    scripted_upstream_server.renderers["/responses"] = ResponsesRenderer()
    base = scripted_upstream_server.base_url
    gateway = start_gateway(
        tmp_path_factory.mktemp("tool-choice-gw"),
        [
            model_table("ch-strict", base),
            model_table("an-strict", base, provider="anthropic"),
            model_table("rs-strict", base, api="responses"),
            model_table("ch-tool-error", base, on_invalid="tool_error"),
            model_table("an-tool-error", base, provider="anthropic", on_invalid="tool_error"),
        ],
    )
    yield gateway
    gateway.stop()


def tools(dialect: Dialect, *, strict: bool = True) -> list[dict[str, Any]]:
    """A strict ``create_refund`` (``strict``: else not strict) and a plain ``lookup_order``."""
    specs = [("create_refund", SCHEMA, strict), ("lookup_order", LOOKUP_SCHEMA, False)]
    if dialect == "chat":
        return [
            {"type": "function", "function": {"name": n, "parameters": p, "strict": s}}
            for n, p, s in specs
        ]
    if dialect == "responses":
        return [{"type": "function", "name": n, "parameters": p, "strict": s} for n, p, s in specs]
    return [{"name": n, "input_schema": p, **({"strict": True} if s else {})} for n, p, s in specs]


def tool_choice(dialect: Dialect, choice: Choice) -> Any:
    """``tool_choice`` asking for a call ("required") or for ``create_refund`` ("named")."""
    if dialect == "messages":
        return (
            {"type": "any"} if choice == "required" else {"type": "tool", "name": "create_refund"}
        )
    if choice == "required":
        return "required"
    if dialect == "chat":
        return {"type": "function", "function": {"name": "create_refund"}}
    return {"type": "function", "name": "create_refund"}


@dataclass
class Answer:
    """An SDK's final object, read the same way in every dialect."""

    text: str
    calls: list[tuple[str, Any]]  # (name, parsed arguments)
    finish: str  # finish_reason, stop_reason, or the Responses status


def answer(dialect: Dialect, final: Any) -> Answer:
    if dialect == "chat":
        choice = final.choices[0]
        message = choice.message
        calls = [
            (t.function.name, json.loads(t.function.arguments)) for t in message.tool_calls or []
        ]
        return Answer(message.content or "", calls, choice.finish_reason)
    if dialect == "responses":
        calls = [
            (i.name, json.loads(i.arguments)) for i in final.output if i.type == "function_call"
        ]
        return Answer(final.output_text, calls, final.status)
    text = "".join(b.text for b in final.content if b.type == "text")
    calls = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
    return Answer(text, calls, final.stop_reason)


# How each dialect says the answer is a plain text turn, and a tool turn.
TEXT_END = {"chat": "stop", "responses": "completed", "messages": "end_turn"}
TOOL_END = {"chat": "tool_calls", "responses": "completed", "messages": "tool_use"}


def status_error(exc: BaseException) -> openai.APIStatusError | anthropic.APIStatusError:
    """``exc`` as either SDK's status error (its ``response`` is the HTTP answer)."""
    assert isinstance(exc, openai.APIStatusError | anthropic.APIStatusError), exc
    return exc
