"""End to end on the real local model: the openai and anthropic SDKs against a gateway
subprocess serving Qwen2.5-0.5B in its three modes (see ``conftest``).

Assert the gateway's guarantee, not the model's wording: every strict answer is either
schema-valid or a 422 with the envelope; constrained mode returns valid arguments; the
correction call really happens (header and usage ``schema_retries``). Temperature 0 keeps
the model's (mis)behaviour repeatable.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import jsonschema  # type: ignore[import-untyped]
import openai
import pytest

from tests.local.awkward import CASES, Case
from tests.local.conftest import CONSTRAINED, FREE, FREE_FIX
from tests.support.gateway_proc import GatewayProcess

pytestmark = pytest.mark.slow

# Prompts on which the free model (temperature 0) breaks patterns or units.
FREE_CASES = [c for c in CASES if c.id in ("thermo-hot", "transfer-euros", "refund-letters")]
# Schemas whose every constraint the grammar can express (no minimum / maxLength).
GRAMMAR_TOOL: dict[str, Any] = {
    "name": "set_thermostat",
    "description": "Set a room's heating.",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {
            "room": {"type": "string", "enum": ["kitchen", "bedroom", "office"]},
            "celsius": {"type": "integer"},
            "mode": {"type": "string", "enum": ["heat", "cool", "off"]},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        },
        "required": ["room", "celsius", "mode", "code"],
        "additionalProperties": False,
    },
}


def _openai(gw: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=180
    )


def _forced(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _outcome(client: openai.OpenAI, model: str, case: Case) -> tuple[str, int]:
    """("valid", retries) after checking the arguments, or ("422", retries) after checking
    the envelope. Anything else fails the test."""
    try:
        raw = client.chat.completions.with_raw_response.create(  # type: ignore[call-overload]
            model=model,
            messages=[{"role": "user", "content": case.prompt}],
            tools=[case.wire_tool()],
            tool_choice=_forced(case.tool["name"]),
            temperature=0,
            max_tokens=200,
        )
    except openai.UnprocessableEntityError as exc:
        body = exc.response.json()
        assert body["error"]["code"] == "tool_arguments_invalid", body
        param = body["error"]["param"]
        assert isinstance(param, str) and (param == "" or param.startswith("/")), body
        assert body["request_id"] == exc.response.headers["x-request-id"]
        return "422", int(exc.response.headers["x-syntic-schema-retries"])
    retries = int(raw.headers["x-syntic-schema-retries"])
    completion = raw.parse()
    assert completion.usage is not None
    assert completion.usage.model_extra == {"schema_retries": retries}
    calls = completion.choices[0].message.tool_calls or []
    assert calls, "a forced tool_choice must yield a call"
    for call in calls:
        assert call.type == "function"
        assert call.function.name == case.tool["name"]
        jsonschema.validate(json.loads(call.function.arguments), case.schema)
    return "valid", retries


def test_free_mode_is_valid_or_422_and_corrects(local_gateway: GatewayProcess) -> None:
    with _openai(local_gateway) as client:
        outcomes = [_outcome(client, FREE, case) for case in FREE_CASES]
    assert all(retries in (0, 1) for _, retries in outcomes)
    assert all(retries == 1 for kind, retries in outcomes if kind == "422")
    # The small model breaks these schemas: the gateway's correction call must have run.
    assert sum(retries for _, retries in outcomes) >= 1, outcomes


def test_constrained_mode_returns_valid_arguments(local_gateway: GatewayProcess) -> None:
    case = Case("grammar", GRAMMAR_TOOL, "Kitchen to twenty degrees on heat, code ab-12.")
    with _openai(local_gateway) as client:
        kind, retries = _outcome(client, CONSTRAINED, case)
        # An escaped pattern ("@example\\.com"): the grammar must parse, not crash the server.
        meeting = next(c for c in CASES if c.id == "meeting-pm")
        refund_kind, _ = _outcome(client, CONSTRAINED, meeting)
    assert (kind, retries) == ("valid", 0)
    assert refund_kind in ("valid", "422")


def test_correction_runs_under_the_grammar(local_gateway: GatewayProcess) -> None:
    # Free generation writes the code as the user typed it ("ab-12"): a pattern mismatch.
    # The correction is generated under set_thermostat's grammar, so it matches.
    case = Case("grammar-fix", GRAMMAR_TOOL, "Kitchen to twenty degrees on heat, code ab-12.")
    with _openai(local_gateway) as client:
        assert _outcome(client, FREE_FIX, case) == ("valid", 1)


def test_streaming_strict_call(local_gateway: GatewayProcess) -> None:
    case = next(c for c in CASES if c.id == "refund-pounds")
    with _openai(local_gateway) as client:
        try:
            stream = client.chat.completions.create(  # type: ignore[call-overload]
                model=CONSTRAINED,
                messages=[{"role": "user", "content": case.prompt}],
                tools=[case.wire_tool()],
                tool_choice=_forced("create_refund"),
                temperature=0,
                max_tokens=200,
                stream=True,
            )
            args = ""
            finish = None
            for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                for call in delta.tool_calls or []:
                    args += call.function.arguments or "" if call.function else ""
                finish = chunk.choices[0].finish_reason or finish
        except openai.APIError as exc:  # in-band 422 after validation is the other allowed end
            assert "tool_arguments_invalid" in str(exc.body or exc.message)
            return
    assert finish == "tool_calls"
    jsonschema.validate(json.loads(args), case.schema)


def test_anthropic_sdk_strict_tool(local_gateway: GatewayProcess) -> None:
    case = next(c for c in CASES if c.id == "thermo-fahrenheit")
    client = anthropic.Anthropic(
        base_url=local_gateway.base_url,
        api_key=local_gateway.api_key,
        max_retries=0,
        timeout=180,
    )
    tool: dict[str, Any] = {
        "name": case.tool["name"],
        "description": case.tool["description"],
        "input_schema": case.schema,
        "strict": True,
    }
    try:
        raw = client.messages.with_raw_response.create(  # type: ignore[call-overload]
            model=FREE,
            max_tokens=200,
            messages=[{"role": "user", "content": case.prompt}],
            tools=[tool],
            tool_choice={"type": "tool", "name": case.tool["name"]},
            extra_body={"temperature": 0},
        )
    except anthropic.UnprocessableEntityError as exc:
        assert exc.response.json()["error"]["code"] == "tool_arguments_invalid"
        assert exc.response.headers["x-syntic-schema-retries"] == "1"
        return
    finally:
        client.close()
    message = raw.parse()
    uses = [b for b in message.content if b.type == "tool_use"]
    assert uses and message.stop_reason == "tool_use"
    for block in uses:
        jsonschema.validate(block.input, case.schema)
    retries = int(raw.headers["x-syntic-schema-retries"])
    assert message.usage.model_extra == {"schema_retries": retries}
