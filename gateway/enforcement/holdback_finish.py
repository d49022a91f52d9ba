"""The hold-back's checks at the finish: a strict output's held text is validated, and a call
``tool_choice`` requires but the answer lacks is corrected into it."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

from gateway.canonical import (
    DEFAULT_REFUSAL,
    ChatResponse,
    Finish,
    FinishReason,
    RefusalDelta,
    StreamEvent,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    ToolCallStart,
)
from gateway.enforcement.check import StrictPlan
from gateway.enforcement.correct import finished_call
from gateway.enforcement.holdback_slot import MISSING, Corrections, HeldSlot
from gateway.errors import GatewayError

MissingEnforcer = Callable[[str, FinishReason], Awaitable[ChatResponse]]
"""Correct an answer (its text, how it ended) that makes no call although ``tool_choice``
requires one: return the correction's answer (its valid calls, or its refusal) or raise."""

OutputEnforcer = Callable[
    [str, FinishReason, "tuple[TokenLogprob, ...] | None"], Awaitable["TextDelta | RefusalDelta"]
]
"""Validate + correct a strict ``response_format`` reply (its text, how it ended, its
logprobs): return the valid content (or the correction's refusal) or raise."""


class FinishChecks:
    """What the finish of one stream checks; each correction runs as a task in its slot."""

    __slots__ = (
        "_enforce_missing",
        "_enforce_output",
        "_fixes",
        "_plan",
        "_queue",
        "_said",
    )

    def __init__(
        self,
        plan: StrictPlan,
        queue: deque[StreamEvent | HeldSlot],
        said: list[str],
        fixes: Corrections,
        *,
        enforce_output: OutputEnforcer | None,
        enforce_missing: MissingEnforcer | None,
    ) -> None:
        self._plan = plan
        self._queue = queue
        self._said = said  # the answer's text, for the missing call's correction
        self._fixes = fixes
        self._enforce_output = enforce_output
        self._enforce_missing = enforce_missing

    def await_call(self, text: HeldSlot | None, finish: Finish) -> None:
        """No call, though ``tool_choice`` requires one: the finish waits behind the one
        correction, which releases its calls (or the failure) in the finish's place. A
        strict output's held text goes out with them: it is a tool turn then."""
        held: list[StreamEvent] = []
        if text is not None:
            text.open = False
            if text.parts:
                held.append(TextDelta("".join(text.parts), tuple(text.tokens) or None))
            text.done = True
        slot = HeldSlot(MISSING, "", "")
        self._queue.append(slot)
        self._fixes.spawn(slot, self._correct_missing(slot, finish, held))

    def close_text(
        self,
        slot: HeldSlot,
        reason: FinishReason,
        *,
        refused: bool,
        refusal_deltas: bool,
        saw_call: bool,
    ) -> None:
        slot.open = False
        text = "".join(slot.parts)
        if refused and not refusal_deltas:
            # Refused without refusal deltas (Anthropic): the held text is the refusal.
            slot.out = [RefusalDelta(text, tuple(slot.tokens) or None)] if text else []
            slot.done = True
            return
        if saw_call or refused or self._enforce_output is None:
            # As non-streaming: a reply that calls tools is not held to response_format.
            self._release_text(slot, text)
            return
        self._fixes.spawn(slot, self._correct_text(slot, text, reason))

    async def _correct_missing(
        self, slot: HeldSlot, finish: Finish, held: list[StreamEvent]
    ) -> None:
        assert self._enforce_missing is not None
        try:
            fixed = await self._enforce_missing("".join(self._said), finish.reason)
        except GatewayError as exc:
            said = self._fixes.explain(exc, None)
            if said is None:
                raise
            slot.out = [*held, TextDelta(said), Finish("stop", finish.stop_sequence)]
            slot.done = True
            return
        out = held
        if fixed.refusal is not None:  # the correction's refusal is the answer
            out.append(RefusalDelta(fixed.refusal or DEFAULT_REFUSAL))
            slot.out = [*out, Finish("stop", refused=True)]
            slot.done = True
            return
        for i, found in enumerate(fixed.tool_calls):
            call = finished_call(found, self._plan)
            out.append(ToolCallStart(i, call.id, call.name, call.namespace))
            if call.raw_arguments:
                out.append(ToolCallDelta(i, call.raw_arguments))
        out.append(Finish("tool_calls"))
        slot.out = out
        slot.done = True

    async def _correct_text(self, slot: HeldSlot, text: str, reason: FinishReason) -> None:
        assert self._enforce_output is not None
        fixed = await self._enforce_output(text, reason, tuple(slot.tokens) or None)
        slot.out = [fixed] if fixed.text else []
        slot.done = True

    @staticmethod
    def _release_text(slot: HeldSlot, text: str) -> None:
        slot.out = [TextDelta(text, tuple(slot.tokens) or None)] if text else []
        slot.done = True
