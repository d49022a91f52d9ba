"""One table of strict-mode scenarios, run through every client dialect.

Each scenario runs with the official ``openai`` SDK on ``/v1/chat/completions`` and on
``/v1/responses``, and the official ``anthropic`` SDK on ``/v1/messages``, over both
upstream wire formats (chat-completions ``oa-*`` and Messages ``an-*`` models of one
scripted server), streamed and not. Every dialect must give the table's status, code,
pointer and retry count, streamed or not, and the same observation as the others (message
text and returned arguments included).

400 params name the client's own field: ``{tool0}`` is ``tools[0].function.parameters`` in
chat completions, ``tools[0].parameters`` in Responses and ``tools[0].input_schema`` in
Messages; ``{output}`` is ``response_format.json_schema.schema`` / ``text.format.schema`` /
``output_config.format.schema``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anthropic
import openai
import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import REFUND_SCHEMA as SCHEMA
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream, Step

NESTED_NOT_STRICT = copy.deepcopy(SCHEMA)
NESTED_NOT_STRICT["properties"]["note"] = {"type": "object", "properties": {}, "required": []}
UNSUPPORTED = copy.deepcopy(SCHEMA)
UNSUPPORTED["properties"]["reason"] = {"not": {"type": "string"}}
ANSWER: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}
NOT_STRICT_ANSWER = {k: v for k, v in ANSWER.items() if k != "additionalProperties"}

GOOD = {"order_number": "582131", "amount_pence": 1250, "reason": "damaged", "note": None}
GOOD_ARGS = json.dumps(GOOD)
WRONG_TYPE = GOOD_ARGS.replace("1250", '"12.50"')
MANY_WRONG = '{"order_number": "58", "amount_pence": 0, "reason": "bored", "note": null}'
MISSING = '{"order_number": "582131", "amount_pence": 1250, "reason": "damaged"}'
EXTRA = GOOD_ARGS[:-1] + ', "refund_all": true}'
NOT_JSON = '{"order_number": 582131 amount'
CUT = '{"order_number": "5821'
MESSAGES: list[Any] = [{"role": "user", "content": "Order 582131 arrived crushed, refund it."}]


def call(arguments: str, name: str = "create_refund") -> Reply:
    return Reply(tool_calls=[Call(name, arguments)])


@dataclass(frozen=True)
class Outcome:
    status: int | None  # None: an in-band error event (output had gone out: none expected)
    code: str | None = None
    param: str | None = None
    retries: int | None = 0
    upstream_calls: int = 0
    result: Any = None


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    expect: Outcome
    # the strict tool's schema (None: no tool)
    schema: dict[str, Any] | None = field(default_factory=lambda: SCHEMA)
    output: dict[str, Any] | None = None  # a strict JSON-output schema
    model: str = "strict"


def ok(retries: int, result: Any = GOOD) -> Outcome:
    return Outcome(200, retries=retries, upstream_calls=retries + 1, result=result)


def refused(code: str, param: str) -> Outcome:
    return Outcome(422, code, param, retries=1, upstream_calls=2)


def rejected(code: str, param: str) -> Outcome:
    return Outcome(400, code, param, retries=0, upstream_calls=0)


SCENARIOS = [
    Scenario("valid-call", (call(GOOD_ARGS),), ok(0)),
    Scenario("corrected-call", (call(WRONG_TYPE), call(GOOD_ARGS)), ok(1)),
    Scenario("not-json-then-valid", (call(NOT_JSON), call(GOOD_ARGS)), ok(1)),
    Scenario(
        "invalid-twice",
        (call(WRONG_TYPE), call(WRONG_TYPE)),
        refused("tool_arguments_invalid", "/amount_pence"),
    ),
    Scenario(
        "several-errors-first-pointer",
        (call(MANY_WRONG), call(MANY_WRONG)),
        refused("tool_arguments_invalid", "/amount_pence"),
    ),
    Scenario(
        "missing-key-twice", (call(MISSING), call(MISSING)), refused("tool_arguments_invalid", "")
    ),
    Scenario("extra-key-twice", (call(EXTRA), call(EXTRA)), refused("tool_arguments_invalid", "")),
    Scenario(
        "not-json-twice", (call(NOT_JSON), call(NOT_JSON)), refused("tool_arguments_invalid", "")
    ),
    Scenario(
        "unknown-tool-twice",
        (call("{}", name="drop_tables"), call("{}", name="drop_tables")),
        refused("tool_arguments_invalid", ""),
    ),
    Scenario(
        "truncated-twice",
        (
            Reply(tool_calls=[Call("create_refund", CUT)], finish_reason="length"),
            Reply(tool_calls=[Call("create_refund", CUT)], finish_reason="length"),
        ),
        # Cut off by max_tokens: no correction (it would be cut again), reported as such.
        Outcome(422, "tool_arguments_invalid", "", retries=0, upstream_calls=1),
    ),
    Scenario(
        "schema-not-strict",
        (),
        rejected("schema_not_strict", "{tool0}.properties.note"),
        schema=NESTED_NOT_STRICT,
    ),
    Scenario(
        "invalid-tool-schema",
        (),
        rejected("invalid_tool_schema", "{tool0}.properties.reason.not"),
        schema=UNSUPPORTED,
    ),
    Scenario("strict-not-supported", (), rejected("strict_not_supported", "model"), model="plain"),
    Scenario(
        "output-valid",
        (Reply(content='{"answer": 42}'),),
        ok(0, {"answer": 42}),
        schema=None,
        output=ANSWER,
    ),
    Scenario(
        "output-corrected",
        (Reply(content='{"answer": "42"}'), Reply(content='{"answer": 42}')),
        ok(1, {"answer": 42}),
        schema=None,
        output=ANSWER,
    ),
    Scenario(
        "output-invalid-twice",
        (Reply(content="forty-two"), Reply(content='{"answer": "x"}')),
        refused("json_output_invalid", "/answer"),
        schema=None,
        output=ANSWER,
    ),
    Scenario(
        "output-schema-not-strict",
        (),
        rejected("schema_not_strict", "{output}"),
        schema=None,
        output=NOT_STRICT_ANSWER,
    ),
]


@dataclass(frozen=True)
class Observed:
    status: int | None
    code: str | None = None
    param: str | None = None
    retries: int | None = None
    upstream_calls: int = 0
    result: Any = None
    message: str | None = None


def _retries(headers: Any) -> int | None:
    value = headers.get("x-syntic-schema-retries")
    return None if value is None else int(value)


def _error(status: int, headers: Any, body: Any) -> Observed:
    error = body["error"]
    return Observed(
        status, error["code"], error["param"], _retries(headers), message=error["message"]
    )


# --- the openai dialect ---------------------------------------------------------------------


def openai_kwargs(s: Scenario, model: str) -> dict[str, Any]:
    kw: dict[str, Any] = {"model": model, "messages": MESSAGES, "max_tokens": 256}
    if s.schema is not None:
        kw["tools"] = [
            {
                "type": "function",
                "function": {"name": "create_refund", "strict": True, "parameters": s.schema},
            }
        ]
    if s.output is not None:
        kw["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "strict": True, "schema": s.output},
        }
    return kw


def run_openai(gw: GatewayProcess, s: Scenario, model: str, stream: bool) -> Observed:
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c:
        kw = openai_kwargs(s, model)
        try:
            if not stream:
                raw = c.chat.completions.with_raw_response.create(**kw)
                message = raw.parse().choices[0].message
                calls = [
                    (t.function.name, json.loads(t.function.arguments))
                    for t in message.tool_calls or []
                    if t.type == "function"
                ]
                result = json.loads(message.content or "null") if s.output else calls
                return Observed(200, retries=_retries(raw.headers), result=result)
            content, retries = "", None
            args: dict[int, str] = {}
            names: dict[int, str] = {}
            with c.chat.completions.create(
                **kw, stream=True, stream_options={"include_usage": True}
            ) as chunks:
                for chunk in chunks:
                    if chunk.usage is not None:
                        retries = (chunk.usage.model_extra or {}).get("schema_retries")
                    for choice in chunk.choices:
                        content += choice.delta.content or ""
                        for tc in choice.delta.tool_calls or []:
                            fn = tc.function
                            if fn and fn.name:
                                names[tc.index] = fn.name
                            args[tc.index] = args.get(tc.index, "") + (
                                fn.arguments or "" if fn else ""
                            )
            calls = [(names[i], json.loads(args[i])) for i in sorted(names)]
            return Observed(200, retries=retries, result=json.loads(content) if s.output else calls)
        except openai.APIStatusError as exc:
            return _error(exc.status_code, exc.response.headers, exc.response.json())
        except openai.APIError as exc:  # the in-band error event of a committed stream
            body: Any = exc.body
            return Observed(
                None,
                exc.code,
                exc.param,
                message=body.get("message") if isinstance(body, dict) else None,
            )


# --- the anthropic dialect ------------------------------------------------------------------


def anthropic_kwargs(s: Scenario, model: str) -> dict[str, Any]:
    kw: dict[str, Any] = {"model": model, "messages": MESSAGES, "max_tokens": 256}
    if s.schema is not None:
        kw["tools"] = [{"name": "create_refund", "strict": True, "input_schema": s.schema}]
    if s.output is not None:
        kw["output_config"] = {"format": {"type": "json_schema", "schema": s.output}}
    return kw


def _anthropic_result(s: Scenario, content: list[Any]) -> Any:
    if s.output:
        return json.loads("".join(b.text for b in content if b.type == "text"))
    return [(b.name, b.input) for b in content if b.type == "tool_use"]


def run_anthropic(gw: GatewayProcess, s: Scenario, model: str, stream: bool) -> Observed:
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=0) as c:
        kw = anthropic_kwargs(s, model)
        try:
            if not stream:
                raw = c.messages.with_raw_response.create(**kw)
                msg = raw.parse()
                return Observed(
                    200, retries=_retries(raw.headers), result=_anthropic_result(s, msg.content)
                )
            retries = None
            with c.messages.stream(**kw) as events:
                for event in events:
                    if event.type == "message_delta":
                        retries = (event.usage.model_extra or {}).get("schema_retries")
                final = events.get_final_message()
            return Observed(200, retries=retries, result=_anthropic_result(s, final.content))
        except anthropic.APIStatusError as exc:
            if exc.status_code == 200:  # the in-band error event of a committed stream
                error = exc.body["error"]  # type: ignore[index]
                return Observed(None, error["code"], error["param"], message=error["message"])
            return _error(exc.status_code, exc.response.headers, exc.response.json())


# --- the responses dialect ------------------------------------------------------------------


def responses_kwargs(s: Scenario, model: str) -> dict[str, Any]:
    kw: dict[str, Any] = {"model": model, "input": MESSAGES, "max_output_tokens": 256}
    if s.schema is not None:
        kw["tools"] = [
            {"type": "function", "name": "create_refund", "strict": True, "parameters": s.schema}
        ]
    if s.output is not None:
        kw["text"] = {
            "format": {"type": "json_schema", "name": "answer", "strict": True, "schema": s.output}
        }
    return kw


def _responses_result(s: Scenario, response: Any) -> Any:
    if s.output:
        return json.loads(response.output_text)
    return [(i.name, json.loads(i.arguments)) for i in response.output if i.type == "function_call"]


def run_responses(gw: GatewayProcess, s: Scenario, model: str, stream: bool) -> Observed:
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0) as c:
        kw = responses_kwargs(s, model)
        try:
            if not stream:
                raw = c.responses.with_raw_response.create(**kw)
                return Observed(
                    200, retries=_retries(raw.headers), result=_responses_result(s, raw.parse())
                )
            with c.responses.stream(**kw) as events:
                for _event in events:
                    pass
                final = events.get_final_response()
            assert final.usage is not None
            retries = (final.usage.model_extra or {}).get("schema_retries")
            return Observed(200, retries=retries, result=_responses_result(s, final))
        except openai.APIStatusError as exc:
            return _error(exc.status_code, exc.response.headers, exc.response.json())
        except openai.APIError as exc:  # the in-band error event of a committed stream
            body: Any = exc.body
            return Observed(
                None,
                exc.code,
                exc.param,
                message=body.get("message") if isinstance(body, dict) else None,
            )


# --- the matrix -------------------------------------------------------------------------------

Runner = Callable[[GatewayProcess, Scenario, str, bool], Observed]
DIALECTS: dict[str, tuple[Runner, dict[str, str]]] = {
    "openai": (
        run_openai,
        {"tool0": "tools[0].function.parameters", "output": "response_format.json_schema.schema"},
    ),
    "anthropic": (
        run_anthropic,
        {"tool0": "tools[0].input_schema", "output": "output_config.format.schema"},
    ),
    "responses": (
        run_responses,
        {"tool0": "tools[0].parameters", "output": "text.format.schema"},
    ),
}


@pytest.fixture(scope="module")
def gw(anthropic_gateway: GatewayProcess) -> GatewayProcess:
    return anthropic_gateway  # shared: tests/support/fixtures.py


def expected(s: Scenario, paths: dict[str, str], stream: bool) -> Outcome:
    out = s.expect
    if out.param is not None and out.status == 400:
        out = replace(out, param=out.param.format(**paths))
    if out.result == GOOD:
        out = replace(out, result=[("create_refund", GOOD)])
    # Streamed too, a 422 is a plain HTTP answer (with its retries header): no scenario
    # shows output before its strict call, so the preamble is still held when it fails.
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", ["oa", "an"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_same_outcome_in_every_dialect(
    gw: GatewayProcess, upstream: ScriptedUpstream, scenario: Scenario, provider: str, stream: bool
) -> None:
    model = f"{provider}-{scenario.model}"
    seen: dict[str, Observed] = {}
    for dialect, (run, paths) in DIALECTS.items():
        upstream.reset()
        upstream.queue(*scenario.steps)
        observed = replace(run(gw, scenario, model, stream), upstream_calls=len(upstream.requests))
        want = expected(scenario, paths, stream)
        got = Outcome(
            observed.status,
            observed.code,
            observed.param,
            observed.retries,
            observed.upstream_calls,
            observed.result,
        )
        assert got == want, dialect
        seen[dialect] = observed
    # Same message, same arguments: only the spelling of a 400's param may differ.
    first = seen["openai"]
    for dialect, other in seen.items():
        assert other.message == first.message, dialect
        assert other.result == first.result, dialect
    if scenario.name == "truncated-twice":
        assert first.message and "cut off by the token limit" in first.message
