"""The hold-back's per-call hold: which tool calls are held, their fragments, and each held
call's check when it completes or closes (valid: released; invalid: one correction)."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

from gateway.canonical import (
    FinishReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
)
from gateway.enforcement.check import StrictPlan
from gateway.enforcement.correct import INLINE_ARGUMENT_BYTES, call_violations
from gateway.enforcement.held import HeldEvent
from gateway.enforcement.holdback_slot import Corrections, HeldSlot, emit
from gateway.errors import GatewayError, UpstreamError

CallEnforcer = Callable[[ToolCall, "FinishReason | None"], Awaitable[ToolCall]]
"""Validate + correct ONE call: return the valid call (original ``id``) or raise 422."""


class CallHold:
    """The tool calls of one stream: held ones queue as slots, the others pass through."""

    __slots__ = (
        "_enforce_call",
        "_fixes",
        "_guard_unknown",
        "_plan",
        "_queue",
        "_strict",
        "calls",
        "client_call",
        "dropped",
        "open",
        "saw_call",
    )

    def __init__(
        self,
        plan: StrictPlan,
        queue: deque[StreamEvent | HeldSlot],
        fixes: Corrections,
        *,
        enforce_call: CallEnforcer,
    ) -> None:
        self._plan = plan
        self._strict = plan.tools
        self._guard_unknown = bool(plan.tools)
        self._queue = queue
        self._fixes = fixes
        self._enforce_call = enforce_call
        self.calls: dict[int, HeldSlot | None] = {}  # index -> held slot, None = pass-through
        self.open: list[HeldSlot] = []
        self.saw_call = False
        self.client_call = False
        self.dropped = 0  # calls dropped and explained (tool_error)

    def all_dropped(self) -> bool:
        return self.dropped == len(self.calls) and not self.client_call

    def start(self, event: ToolCallStart, out: list[HeldEvent]) -> None:
        self.saw_call = True
        for slot in self.open:
            if slot.index != event.index:
                self._close(slot, None)
        self.open = [s for s in self.open if s.open]
        if event.index in self.calls:
            raise UpstreamError(f"The upstream started tool call {event.index} twice.")
        name = event.name
        forced = self._plan.forced
        if (
            name in self._strict
            or (self._guard_unknown and name not in self._plan.tool_names)
            or (forced is not None and name != forced)
        ):
            slot = HeldSlot(event.index, event.id, name, event.namespace, event.members)
            self.calls[event.index] = slot
            self.open.append(slot)
            self._queue.append(slot)
        else:
            self.calls[event.index] = None
            emit(self._queue, event, out)

    def delta(self, event: ToolCallDelta, out: list[HeldEvent]) -> None:
        try:
            slot = self.calls[event.index]
        except KeyError:
            raise UpstreamError(
                f"The upstream sent arguments for tool call {event.index} before starting it."
            ) from None
        if slot is None:
            emit(self._queue, event, out)
        elif slot.open:
            slot.parts.append(event.arguments)
            if event.arguments.rstrip().endswith("}"):
                self._try_complete(slot)
        elif not slot.early:
            raise UpstreamError(
                f"The upstream sent arguments for tool call {event.index} after it ended."
            )
        # else: text after a complete, valid, released object (whitespace) is dropped.

    def close_open(self, cut: FinishReason | None) -> None:
        """The finish: every call still open closes (``cut``: it ended on ``length``)."""
        for slot in self.open:
            self._close(slot, cut)
        self.open = []

    def _try_complete(self, slot: HeldSlot) -> None:
        """Release a call as soon as its arguments are a complete, valid JSON object, without
        waiting for the next call or the finish chunk (one model step later upstream). A
        strict root is an object, so nothing valid can follow its closing brace."""
        call = slot.call()
        if (
            call.name in self._strict
            and len(call.raw_arguments) <= INLINE_ARGUMENT_BYTES  # larger: checked at close
            and not call_violations(call, self._plan)
        ):
            slot.open = False
            slot.early = True
            slot.release(call, self._plan)
            self.open.remove(slot)

    def _close(self, slot: HeldSlot, cut: FinishReason | None) -> None:
        slot.open = False
        call = slot.call()
        if len(call.raw_arguments) <= INLINE_ARGUMENT_BYTES and not call_violations(
            call, self._plan
        ):
            slot.release(call, self._plan)
            return
        # Invalid, or large: the enforcer validates (a large call in a worker thread, not on
        # the event loop) and corrects it once if it has to; the stream keeps flowing.
        self._fixes.spawn(slot, self._correct(slot, call, cut))

    async def _correct(self, slot: HeldSlot, call: ToolCall, cut: FinishReason | None) -> None:
        try:
            fixed = await self._enforce_call(call, cut)
        except GatewayError as exc:
            said = self._fixes.explain(exc, call.name)
            if said is None:
                raise
            slot.out = [TextDelta(said)]  # in the dropped call's place
            slot.done = True
            self.dropped += 1
            return
        slot.release(
            ToolCall(
                id=slot.call_id,
                name=fixed.name,
                raw_arguments=fixed.raw_arguments,
                namespace=slot.namespace,
                members=fixed.members,
            ),
            self._plan,
        )
