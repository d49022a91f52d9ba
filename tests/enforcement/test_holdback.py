"""The streaming hold-back over scripted canonical event sequences.

The upstream is an in-process async generator of canonical events; corrections go through
the real ``enforce_call`` / ``enforce_output`` (via ``holdback_for``) to an in-process
``Upstream`` whose ``complete`` replays scripted replies and records what it was asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import orjson
import pytest

import validator
from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    FinishReason,
    ForcedTool,
    JsonSchemaFormat,
    Message,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
    UsageReport,
)
from gateway.canonical import Finish as Fin
from gateway.context import Tally
from gateway.enforcement.check import StrictPlan
from gateway.enforcement.correct import EnforceContext
from gateway.enforcement.holdback import FinalUsage, HeldEvent, HoldBack, holdback_for
from gateway.errors import GatewayError, UpstreamError
from gateway.settings import ModelConfig

REFUND = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
        "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
        "note": {"type": ["string", "null"], "maxLength": 200},
    },
    "required": ["order_number", "amount_pence", "reason", "note"],
    "additionalProperties": False,
}
NOTE = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
GOOD = '{"order_number": "582131", "amount_pence": 1250, "reason": "damaged", "note": null}'
BAD = '{"order_number": "582131", "amount_pence": "12.50", "reason": "damaged", "note": null}'
GOOD2 = '{"text": "hello"}'
BAD2 = '{"text": 5}'
MODEL = ModelConfig(name="m", provider="openai", upstream_model="m")


def request(*, output: bool = False) -> ChatRequest:
    return ChatRequest(
        model="m",
        messages=(Message(role="user", content=(TextPart("refund 582131"),)),),
        tools=(
            ToolSpec("create_refund", REFUND, strict=True),
            ToolSpec("add_note", NOTE, strict=True),
            ToolSpec("lookup", {"type": "object"}),
        ),
        response_format=JsonSchemaFormat(NOTE, strict=True) if output else None,
        stream=True,
    )


def plan_for(req: ChatRequest) -> StrictPlan:
    rf = req.response_format
    return StrictPlan(
        tools={t.name: validator.compile(t.parameters) for t in req.tools if t.strict},
        output=validator.compile(rf.schema) if isinstance(rf, JsonSchemaFormat) else None,
        tool_names=frozenset(t.name for t in req.tools),
    )


def reply(
    *calls: tuple[str, str],
    content: str | None = None,
    usage: int = 7,
    finish: FinishReason = "tool_calls",
) -> ChatResponse:
    return ChatResponse(
        id="chatcmpl-fix",
        model="m",
        content=content,
        tool_calls=tuple(ToolCall(f"call_fix{i}", n, a) for i, (n, a) in enumerate(calls)),
        finish_reason=finish,
        usage=Usage(usage * 10, usage),
    )


@dataclass
class Corrections:
    """The Upstream seam for correction calls: scripted replies, optionally gated."""

    replies: list[ChatResponse]
    gate: asyncio.Event | None = None
    requests: list[ChatRequest] = field(default_factory=list)
    cancelled: int = 0
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def complete(self, req: ChatRequest, model: ModelConfig) -> ChatResponse:
        self.requests.append(req)
        self.asked.set()
        try:
            if self.gate is not None:
                await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.replies.pop(0)

    def stream(self, req: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


@dataclass
class Script:
    """The upstream's event stream: events, an optional failure, and gates."""

    events: Sequence[StreamEvent]
    fail: GatewayError | None = None
    gate_after: int | None = None  # wait for ``gate`` before the event at this position
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    sent: int = 0

    async def run(self) -> AsyncIterator[StreamEvent]:
        try:
            for i, event in enumerate(self.events):
                if i == self.gate_after:
                    await self.gate.wait()
                self.sent += 1
                yield event
            if self.fail is not None:
                raise self.fail
        finally:
            self.closed = True
            self.done.set()


def make(
    script: Script,
    corrections: list[ChatResponse],
    *,
    output: bool = False,
    gate: asyncio.Event | None = None,
) -> tuple[HoldBack, Corrections]:
    req = request(output=output)
    up = Corrections(list(corrections), gate)
    ctx = EnforceContext(upstream=up, model=MODEL, plan=plan_for(req), tally=Tally())
    return holdback_for(req, ctx, script.run()), up


async def collect(hb: HoldBack) -> tuple[list[list[HeldEvent]], GatewayError | None]:
    batches: list[list[HeldEvent]] = []
    try:
        async for batch in hb.batches():
            batches.append(batch)
    except GatewayError as exc:
        return batches, exc
    return batches, None


def flat(batches: list[list[HeldEvent]]) -> list[HeldEvent]:
    return [e for b in batches for e in b]


def start(i: int, name: str = "create_refund") -> ToolCallStart:
    return ToolCallStart(i, f"call_{i}", name)


def frags(i: int, raw: str, n: int = 3) -> list[ToolCallDelta]:
    step = max(1, len(raw) // n)
    return [ToolCallDelta(i, raw[k : k + step]) for k in range(0, len(raw), step)]


def call(i: int, raw: str, name: str = "create_refund") -> list[StreamEvent]:
    return [start(i, name), *frags(i, raw)]


def released(i: int, raw: str, name: str = "create_refund") -> list[HeldEvent]:
    return [start(i, name), ToolCallDelta(i, raw)]


USAGE = UsageReport(Usage(100, 20))
T = TextDelta


@dataclass(frozen=True)
class Case:
    name: str
    events: list[StreamEvent]
    corrections: list[ChatResponse]
    expect: list[HeldEvent]  # without the trailing FinalUsage
    retries: int = 0
    usage: tuple[int, int] = (100, 20)
    output: bool = False


CASES = [
    Case(
        "text only", [T("Hel"), T("lo"), Fin("stop"), USAGE], [], [T("Hel"), T("lo"), Fin("stop")]
    ),
    Case(
        "valid strict call",
        [*call(0, GOOD), Fin("tool_calls"), USAGE],
        [],
        [*released(0, GOOD), Fin("tool_calls")],
    ),
    Case(
        "invalid then corrected",
        [*call(0, BAD), Fin("tool_calls"), USAGE],
        [reply(("create_refund", GOOD))],
        [*released(0, GOOD), Fin("tool_calls")],
        retries=1,
        usage=(170, 27),
    ),
    Case(
        "parallel, first needs correction",
        [*call(0, BAD), *call(1, GOOD2, "add_note"), Fin("tool_calls"), USAGE],
        [reply(("create_refund", GOOD))],
        [*released(0, GOOD), *released(1, GOOD2, "add_note"), Fin("tool_calls")],
        retries=1,
        usage=(170, 27),
    ),
    Case(
        "parallel, both need correction",
        [*call(0, BAD), *call(1, BAD2, "add_note"), Fin("tool_calls"), USAGE],
        [reply(("create_refund", GOOD)), reply(("add_note", GOOD2), usage=3)],
        [*released(0, GOOD), *released(1, GOOD2, "add_note"), Fin("tool_calls")],
        retries=2,
        usage=(200, 30),
    ),
    Case(
        "text before and after a held call",
        [T("Let me "), T("refund. "), *call(0, GOOD), T("Done."), Fin("tool_calls"), USAGE],
        [],
        [T("Let me "), T("refund. "), *released(0, GOOD), T("Done."), Fin("tool_calls")],
    ),
    Case(
        "non-strict call passes through unchanged",
        [*call(0, '{"q": 1, "x": [1,2]}', "lookup"), Fin("tool_calls"), USAGE],
        [],
        [*call(0, '{"q": 1, "x": [1,2]}', "lookup"), Fin("tool_calls")],
    ),
    Case(
        "non-strict after held waits behind it",
        [*call(0, BAD), *call(1, "{}", "lookup"), Fin("tool_calls"), USAGE],
        [reply(("create_refund", GOOD))],
        [*released(0, GOOD), *call(1, "{}", "lookup"), Fin("tool_calls")],
        retries=1,
        usage=(170, 27),
    ),
    Case(
        "unknown tool name is corrected",
        [*call(0, GOOD, "refund_it"), Fin("tool_calls"), USAGE],
        [reply(("create_refund", GOOD))],
        [*released(0, GOOD), Fin("tool_calls")],
        retries=1,
        usage=(170, 27),
    ),
    Case(
        "strict response_format text held and validated",
        [T('{"te'), T('xt": "hi"}'), Fin("stop"), USAGE],
        [],
        [T('{"text": "hi"}'), Fin("stop")],
        output=True,
    ),
    Case(
        "strict response_format corrected",
        [T('{"text": '), T("1}"), Fin("stop"), USAGE],
        [reply(content=GOOD2, finish="stop")],
        [T(GOOD2), Fin("stop")],
        retries=1,
        usage=(170, 27),
        output=True,
    ),
    Case(
        "no usage from upstream is estimated",
        [T("abcdefgh"), Fin("stop")],
        [],
        [T("abcdefgh"), Fin("stop")],
        usage=(0, 2),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_sequences(case: Case) -> None:
    script = Script(case.events)
    hb, up = make(script, case.corrections, output=case.output)
    batches, error = await collect(hb)
    assert error is None
    events = flat(batches)
    assert events[:-1] == case.expect
    final = events[-1]
    assert isinstance(final, FinalUsage)
    estimated = USAGE not in case.events
    assert (final.usage, final.schema_retries) == (
        Usage(*case.usage, estimated=estimated),
        case.retries,
    )
    assert final.estimated == estimated
    assert final.upstream_calls == 1 + case.retries
    assert len(up.requests) == case.retries
    assert script.closed


@dataclass(frozen=True)
class FailCase:
    name: str
    events: list[StreamEvent]
    corrections: list[ChatResponse]
    expect: list[HeldEvent]  # what went out before the error
    code: str
    param: str | None
    message_has: str
    fail: GatewayError | None = None
    upstream_calls: int = 0


FAILS = [
    FailCase(
        "invalid twice",
        [T("ok "), *call(0, BAD), Fin("tool_calls"), USAGE],
        [reply(("create_refund", BAD))],
        [T("ok ")],
        "tool_arguments_invalid",
        "/amount_pence",
        "Arguments for create_refund did not match the schema: /amount_pence must be integer.",
        upstream_calls=1,
    ),
    FailCase(
        "correction calls no tool",
        [*call(0, BAD), Fin("tool_calls"), USAGE],
        [reply(content="sorry", finish="stop")],
        [],
        "tool_arguments_invalid",
        "",
        "did not call create_refund",
        upstream_calls=1,
    ),
    FailCase(
        "length cut-off inside a held call",
        [T("x"), start(0), ToolCallDelta(0, GOOD[:30]), Fin("length"), USAGE],
        [],
        [T("x")],
        "tool_arguments_invalid",
        "",
        'finish_reason "length"',
    ),
    FailCase(
        "upstream fails mid-stream",
        [T("a"), *call(0, GOOD[:40])],
        [],
        [T("a")],
        "upstream_error",
        None,
        "connection reset",
        fail=UpstreamError("Upstream connection reset."),
    ),
    FailCase(
        "upstream ends without finish",
        [T("a"), *call(0, GOOD[:40])],
        [],
        [T("a")],
        "upstream_error",
        None,
        "ended before",
    ),
    FailCase(
        "upstream fails inside an invalid complete call",
        [T("a"), *call(0, BAD)],
        [],
        [T("a")],
        "upstream_error",
        None,
        "connection reset",
        fail=UpstreamError("Upstream connection reset."),
    ),
    FailCase(
        "arguments for an unstarted call",
        [T("a"), ToolCallDelta(3, "{}")],
        [],
        [T("a")],
        "upstream_error",
        None,
        "before starting",
    ),
    FailCase(
        "strict output invalid twice",
        [T('{"text": 1}'), Fin("stop")],
        [reply(content='{"text": 2}', finish="stop")],
        [],
        "json_output_invalid",
        "/text",
        "/text must be string",
        upstream_calls=1,
    ),
]


@pytest.mark.parametrize("case", FAILS, ids=[c.name for c in FAILS])
async def test_failures(case: FailCase) -> None:
    script = Script(case.events, fail=case.fail)
    hb, up = make(script, case.corrections, output=case.name.startswith("strict output"))
    batches, error = await collect(hb)
    assert error is not None
    assert (error.code, error.param) == (case.code, case.param)
    assert case.message_has in error.message
    assert flat(batches) == case.expect
    assert len(up.requests) == case.upstream_calls
    assert script.closed
    # No byte of a held (invalid or truncated) call ever went out.
    assert not any(isinstance(e, ToolCallStart) for e in flat(batches))


async def test_complete_valid_call_released_before_finish() -> None:
    # The object closed and validated: no need to wait for the finish chunk (one more model
    # step upstream). Trailing whitespace from the upstream is dropped.
    events = [T("x"), *call(0, GOOD), ToolCallDelta(0, "  "), Fin("tool_calls"), USAGE]
    script = Script(events, gate_after=len(events) - 3)
    hb, _ = make(script, [])
    it = hb.batches()
    seen: list[HeldEvent] = []
    while ToolCallDelta(0, GOOD) not in seen:
        seen += await asyncio.wait_for(anext(it), 1)
    assert seen == [T("x"), *released(0, GOOD)]
    assert script.sent == len(events) - 3  # the whitespace and finish are still gated
    script.gate.set()
    rest = [e async for b in it for e in b]
    assert rest[0] == Fin("tool_calls")


async def test_fragment_ending_in_brace_inside_a_string_is_not_complete() -> None:
    raw = '{"text": "a}'
    events: list[StreamEvent] = [
        start(0, "add_note"),
        ToolCallDelta(0, raw),
        ToolCallDelta(0, ' b"}'),
        Fin("tool_calls"),
        USAGE,
    ]
    hb, _ = make(Script(events), [])
    batches, error = await collect(hb)
    assert error is None
    assert flat(batches)[:2] == released(0, '{"text": "a} b"}', "add_note")


async def test_valid_call_then_upstream_failure() -> None:
    script = Script([*call(0, GOOD)], fail=UpstreamError("Upstream connection reset."))
    hb, _ = make(script, [])
    batches, error = await collect(hb)
    assert error is not None and error.code == "upstream_error"
    assert flat(batches) == released(0, GOOD)  # complete and valid: already released


async def test_correction_request_forces_the_function() -> None:
    hb, up = make(
        Script([*call(0, BAD), Fin("tool_calls"), USAGE]), [reply(("create_refund", GOOD))]
    )
    await collect(hb)
    (fixed,) = up.requests
    assert fixed.tool_choice == ForcedTool("create_refund")
    assert fixed.messages[-2].tool_calls == (ToolCall("call_0", "create_refund", BAD),)
    assert "/amount_pence must be integer" in fixed.messages[-1].text


async def test_text_is_released_before_the_upstream_continues() -> None:
    script = Script([T("first"), T("second"), Fin("stop"), USAGE], gate_after=1)
    hb, _ = make(script, [])
    it = hb.batches()
    assert await anext(it) == [T("first")]  # while the upstream is still gated
    assert script.sent == 1
    script.gate.set()
    rest = [e async for b in it for e in b]
    assert rest[:2] == [T("second"), Fin("stop")]


async def test_valid_call_released_while_later_call_is_still_streaming() -> None:
    # call 0 closes when call 1 starts: it is released before call 1's arguments arrive.
    script = Script(
        [*call(0, GOOD), start(1, "add_note"), *frags(1, GOOD2), Fin("tool_calls"), USAGE],
        gate_after=len(call(0, GOOD)) + 1,
    )
    hb, _ = make(script, [])
    it = hb.batches()
    seen: list[HeldEvent] = []
    while ToolCallDelta(0, GOOD) not in seen:
        seen += await asyncio.wait_for(anext(it), 1)
    assert seen == released(0, GOOD)
    script.gate.set()
    await it.aclose()


async def test_later_valid_call_waits_for_earlier_correction_then_flows() -> None:
    # index order is kept (the openai SDK accumulates by position), and the upstream keeps
    # being read while the correction runs.
    gate = asyncio.Event()
    script = Script(
        [T("a"), *call(0, BAD), *call(1, GOOD2, "add_note"), T("b"), Fin("tool_calls"), USAGE]
    )
    hb, up = make(script, [reply(("create_refund", GOOD))], gate=gate)
    it = hb.batches()
    assert await anext(it) == [T("a")]
    pulling = asyncio.ensure_future(anext(it))
    await asyncio.wait_for(script.done.wait(), 1)
    assert up.requests and script.sent == len(script.events)  # upstream drained meanwhile
    assert not pulling.done()  # nothing releasable while call 0 is being corrected
    gate.set()
    rest = [*await pulling, *[e async for b in it for e in b]]
    assert rest[:-1] == [
        *released(0, GOOD),
        *released(1, GOOD2, "add_note"),
        T("b"),
        Fin("tool_calls"),
    ]


async def test_second_call_correction_does_not_delay_first() -> None:
    gate = asyncio.Event()
    script = Script([*call(0, GOOD), *call(1, BAD2, "add_note"), Fin("tool_calls"), USAGE])
    hb, up = make(script, [reply(("add_note", GOOD2))], gate=gate)
    it = hb.batches()
    seen: list[HeldEvent] = []
    while ToolCallDelta(0, GOOD) not in seen:
        seen += await asyncio.wait_for(anext(it), 1)
    pulling = asyncio.ensure_future(anext(it))
    await asyncio.wait_for(up.asked.wait(), 1)  # call 0 went out before call 1's correction
    assert not pulling.done()
    gate.set()
    rest = [*await pulling, *[e async for b in it for e in b]]
    assert rest[:2] == released(1, GOOD2, "add_note")


async def test_cancel_during_correction_cancels_it_and_closes_upstream() -> None:
    gate = asyncio.Event()
    script = Script([*call(0, BAD), Fin("tool_calls"), USAGE])
    hb, up = make(script, [reply(("create_refund", GOOD))], gate=gate)

    async def consume() -> list[HeldEvent]:
        return [e async for b in hb.batches() for e in b]

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(up.asked.wait(), 1)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert up.cancelled == 1
    assert script.closed


async def test_aclose_while_upstream_silent_closes_upstream() -> None:
    script = Script([T("a"), T("b"), Fin("stop")], gate_after=1)
    hb, _ = make(script, [])
    it = hb.batches()
    assert await anext(it) == [T("a")]
    pending = asyncio.ensure_future(anext(it))
    await asyncio.sleep(0.01)
    pending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pending
    assert script.closed


async def test_account_partial_estimates_when_no_usage() -> None:
    script = Script([T("x" * 40)], gate_after=1)
    hb, _ = make(script, [])
    hb.prompt_tokens_estimate = 9
    it = hb.batches()
    await anext(it)
    await it.aclose()
    assert hb.account_partial() is True
    assert hb.tally.total == Usage(9, 10, estimated=True)
    assert hb.account_partial() is False


def test_released_arguments_parse() -> None:
    # guard on the fixtures themselves: GOOD/GOOD2 are valid, BAD/BAD2 are not.
    plan = plan_for(request())
    assert plan.tools["create_refund"].validate_json(GOOD) == []
    assert plan.tools["create_refund"].validate_json(BAD) != []
    assert plan.tools["add_note"].validate_json(GOOD2) == []
    assert plan.tools["add_note"].validate_json(BAD2) != []
    assert orjson.loads(GOOD)["amount_pence"] == 1250


async def test_correction_finishing_while_upstream_read_pending_does_not_read_twice() -> None:
    """A correction completes while the read of the upstream's next event (started while
    it ran) is still pending: that read is awaited, not doubled (a second ``anext`` on the
    upstream generator raised "asynchronous generator is already running")."""
    fix_gate = asyncio.Event()
    # Call 1's start closes call 0 (invalid: corrected); the upstream then goes quiet.
    events = [*call(0, BAD), *call(1, GOOD2, "add_note"), T("after"), Fin("tool_calls"), USAGE]
    script = Script(events, gate_after=events.index(T("after")))
    hb, up = make(script, [reply(("create_refund", GOOD))], gate=fix_gate)
    consumer = asyncio.ensure_future(collect(hb))
    await asyncio.wait_for(up.asked.wait(), 1)  # the correction is in flight
    await asyncio.sleep(0.01)  # and the upstream read is pending behind the script's gate
    fix_gate.set()
    await asyncio.sleep(0.01)  # the correction completes first
    script.gate.set()
    batches, error = await asyncio.wait_for(consumer, 2)
    assert error is None
    assert flat(batches)[:-1] == [
        *released(0, GOOD),
        *released(1, GOOD2, "add_note"),
        T("after"),
        Fin("tool_calls"),
    ]


async def test_large_calls_are_validated_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Arguments over 4 KiB to a schema still on the interpreter are not validated on the
    loop (not on each closing brace, not at the call's close): the enforcer validates them
    in a worker thread, then releases the call or corrects it once, as for any call."""

    checked: list[tuple[int, bool]] = []  # (size, on the loop thread)
    original = validator.CompiledSchema.validate_json

    def recording(self: validator.CompiledSchema, raw: bytes | str) -> object:
        checked.append((len(raw), threading.current_thread() is threading.main_thread()))
        return original(self, raw)

    monkeypatch.setattr(validator.CompiledSchema, "validate_json", recording)
    big_good = orjson.dumps({"text": "x" * 6000}).decode()
    big_bad = orjson.dumps({"text": "y" * 6000, "extra": 1}).decode()
    events: list[StreamEvent] = [
        *call(0, big_good, "add_note"),
        *call(1, big_bad, "add_note"),
        Fin("tool_calls"),
        USAGE,
    ]
    # As in the gateway: a new schema comes from lint_compile_async, on the interpreter.
    req = request()
    issues, lazy = await validator.lint_compile_async(dict(NOTE, title=uuid.uuid4().hex))
    assert issues == [] and lazy is not None and not lazy.compiled_code
    plan = plan_for(req)
    plan = StrictPlan(tools={**plan.tools, "add_note": lazy}, tool_names=plan.tool_names)
    up = Corrections([reply(("add_note", GOOD2))])
    ctx = EnforceContext(upstream=up, model=MODEL, plan=plan, tally=Tally())
    hb = holdback_for(req, ctx, Script(events).run())
    batches, error = await collect(hb)
    assert error is None
    assert flat(batches)[:4] == [
        *released(0, big_good, "add_note"),
        *released(1, GOOD2, "add_note"),
    ]
    assert len(up.requests) == 1  # only the invalid one was corrected
    big = [on_loop for size, on_loop in checked if size > 4096]
    assert big and not any(big)  # both large calls checked, neither on the loop
