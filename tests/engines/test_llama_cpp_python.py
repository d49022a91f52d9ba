"""llama-cpp-python's own server behind the gateway, through the official ``openai`` SDK, in
the three setups of ``conftest.py``: a strict call the engine's grammar cannot hold to its
schema (``minimum`` is not in llama-cpp-python's grammar builder) is corrected, or refused
with a 422, and never answered with invalid arguments or a 502; a second turn after a
tool result is accepted (the engine refuses ``content: null`` beside tool calls); a strict
``response_format`` succeeds in the engine's own form; a streamed call is held back whole;
streamed usage, which this engine never reports, is counted with its tokenizer (the
completion exactly; the prompt, which the engine renders with a template the gateway does
not see, is an estimate, and the usage is marked so)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import orjson
import pytest

import validator
from tests.engines.conftest import CONSTRAINED, FIX, FREE, MODES
from tests.support.engine_server import EngineServer
from tests.support.gateway_proc import GatewayProcess

ORDER = {
    "type": "object",
    "properties": {
        "item": {"type": "string"},
        "quantity": {"type": "integer", "minimum": 100},  # the grammar cannot express it
    },
    "required": ["item", "quantity"],
    "additionalProperties": False,
}
TOOL: Any = {
    "type": "function",
    "function": {
        "name": "order",
        "description": "Place an order.",
        "parameters": ORDER,
        "strict": True,
    },
}
FORCED: Any = {"type": "function", "function": {"name": "order"}}
ASK: Any = [{"role": "user", "content": "Order 2 apples."}]
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
LIMITS: dict[str, Any] = {"max_tokens": 40, "temperature": 0}


def _client(gw: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=180
    )


def _valid(schema: dict[str, Any], raw: str) -> bool:
    return not validator.compile(schema).validate_json(raw)


def _corrected_or_refused(call: Any) -> tuple[int, str]:
    """(status, arguments or error code) of a strict call that needs a correction."""
    try:
        raw = call()
    except openai.APIStatusError as exc:
        body = exc.response.json()
        return exc.status_code, str(body["error"]["code"])
    completion = raw.parse()
    assert raw.headers["x-syntic-schema-retries"] == "1"  # the engine took the correction
    tool_calls = completion.choices[0].message.tool_calls
    assert tool_calls is not None and len(tool_calls) == 1
    return raw.status_code, str(tool_calls[0].function.arguments)


@pytest.mark.parametrize("mode", MODES)
def test_a_call_the_grammar_cannot_hold_is_corrected_or_refused(
    engine_gateway: GatewayProcess, mode: str
) -> None:
    with _client(engine_gateway) as client:
        status, result = _corrected_or_refused(
            lambda: client.chat.completions.with_raw_response.create(
                model=mode, messages=ASK, tools=[TOOL], tool_choice=FORCED, **LIMITS
            )
        )
    if status == 200:
        assert _valid(ORDER, result), result  # never invalid arguments
    else:
        assert (status, result) == (422, "tool_arguments_invalid")


@pytest.mark.parametrize("mode", MODES)
def test_a_second_turn_after_a_tool_result_is_accepted(
    engine_gateway: GatewayProcess, mode: str
) -> None:
    """The SDK's own shape of a replayed call (``content: None``) reaches the engine as
    ``content: ""``, which its request model takes."""
    turn: Any = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "order",
                        "arguments": '{"item": "apple", "quantity": 100}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Ordered 100 apples."},
    ]
    with _client(engine_gateway) as client:
        completion = client.chat.completions.create(
            model=mode, messages=turn, tools=[TOOL], max_tokens=16, temperature=0
        )
    assert completion.choices[0].finish_reason in ("stop", "length", "tool_calls")


@pytest.mark.parametrize("mode", MODES)
def test_strict_response_format_succeeds(engine_gateway: GatewayProcess, mode: str) -> None:
    fmt: Any = {
        "type": "json_schema",
        "json_schema": {"name": "person", "schema": PERSON, "strict": True},
    }
    with _client(engine_gateway) as client:
        try:
            completion = client.chat.completions.create(
                model=mode,
                response_format=fmt,
                max_tokens=60,
                temperature=0,
                messages=[{"role": "user", "content": "Describe Ada Lovelace as JSON."}],
            )
        except openai.APIStatusError as exc:
            # Only where the gateway enforces can the model's free JSON miss the schema.
            assert mode != CONSTRAINED and exc.status_code == 422, exc.response.text
            assert exc.response.json()["error"]["code"] == "json_output_invalid"
            return
    content = completion.choices[0].message.content
    assert content is not None and _valid(PERSON, content), content


def test_a_streamed_call_is_held_back_whole_and_its_usage_counted(
    engine_gateway: GatewayProcess, engine: EngineServer
) -> None:
    """No fragment of an invalid call reaches the client: the call arrives whole, valid,
    after its correction. The engine sends no usage in streams: the final chunk's usage
    is counted with its tokenizer, and marked estimated (the prompt's template)."""
    with _client(engine_gateway) as client:
        try:
            stream = client.chat.completions.create(
                model=FREE,
                messages=ASK,
                tools=[TOOL],
                tool_choice=FORCED,
                stream=True,
                stream_options={"include_usage": True},
                **LIMITS,
            )
            chunks = list(stream)
        except openai.APIStatusError as exc:  # refused after the correction, before any byte
            assert exc.status_code == 422, exc.response.text
            assert exc.response.json()["error"]["code"] == "tool_arguments_invalid"
            return
    fragments = [
        tc.function.arguments
        for c in chunks
        for ch in c.choices
        for tc in (ch.delta.tool_calls or ())
        if tc.function and tc.function.arguments
    ]
    usage = next(c.usage for c in chunks if c.usage is not None)
    extra = usage.model_extra or {}
    assert extra.get("estimated") is True, usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    if fragments:  # corrected: one whole, valid call
        assert len(fragments) == 1 and _valid(ORDER, fragments[0]), fragments
        assert extra.get("schema_retries") == 1
    else:  # refused in-band after the correction
        assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)


def test_streamed_usage_is_the_engines_own_count(
    engine_gateway: GatewayProcess, engine: EngineServer
) -> None:
    """The completion tokens billed for a stream are the engine's tokenizer's count of
    the text it sent (the same text tokenized directly), not the gateway's four
    characters a token; the usage says it is estimated (its prompt part is)."""
    with _client(engine_gateway) as client:
        stream = client.chat.completions.create(
            model=CONSTRAINED,
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=12,
            temperature=0,
        )
        chunks = list(stream)
    text = "".join(ch.delta.content or "" for c in chunks for ch in c.choices)
    usage = next(c.usage for c in chunks if c.usage is not None)
    root = engine.base_url.removesuffix("/v1")
    tokens = httpx.post(
        root + "/extras/tokenize",
        content=orjson.dumps({"input": text}),
        headers={"content-type": "application/json"},
        timeout=30,
    ).json()
    assert usage.completion_tokens == len(tokens["tokens"]) > 0
    assert (usage.model_extra or {}).get("estimated") is True
    admin = engine_gateway.syntic("keys", "create", "--name", "ops", "--admin")
    secret = admin.stdout.strip().splitlines()[-1].strip()
    row = _ledger_row(engine_gateway, secret, usage.completion_tokens)
    assert row["estimated"] and row["prompt_tokens"] == usage.prompt_tokens


def _ledger_row(gw: GatewayProcess, admin: str, completion_tokens: int) -> dict[str, Any]:
    """The ledger row of that stream (newest first), once the writer has flushed it."""
    deadline = time.monotonic() + 20
    while True:
        rows = httpx.get(
            gw.base_url + "/admin/requests",
            params={"model": CONSTRAINED},
            headers={"authorization": f"Bearer {admin}"},
            timeout=20,
        ).json()["data"]
        found = [r for r in rows if r["completion_tokens"] == completion_tokens]
        if found:
            return dict(found[0])
        assert time.monotonic() < deadline, rows
        time.sleep(0.05)


def test_the_grammar_fix_asks_the_engine_in_its_own_form(engine_gateway: GatewayProcess) -> None:
    """``correction = "constrained"``: the correction asks for the arguments as the reply,
    in llama-cpp-python's ``json_object`` + ``schema`` form (the engine took it: no 502)."""
    with _client(engine_gateway) as client:
        status, result = _corrected_or_refused(
            lambda: client.chat.completions.with_raw_response.create(
                model=FIX, messages=ASK, tools=[TOOL], tool_choice=FORCED, **LIMITS
            )
        )
    assert status in (200, 422), result


def test_required_with_one_tool_is_asked_for_as_that_tool(engine_gateway: GatewayProcess) -> None:
    """The engine reads ``tool_choice: "required"`` as ``"auto"`` (only a named choice gets
    its grammar); with one tool the gateway names it, so the call comes back a call, under
    the tool's grammar, rather than JSON in the text."""
    easy: Any = {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
    with _client(engine_gateway) as client:
        completion = client.chat.completions.create(
            model=FREE,
            messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
            tools=[easy],
            tool_choice="required",
            **LIMITS,
        )
    calls = completion.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1 and calls[0].type == "function"
    assert calls[0].function.name == "lookup"
    assert _valid(easy["function"]["parameters"], calls[0].function.arguments)
