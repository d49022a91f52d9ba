"""A hold-back's held slot: a strict call (or held text) kept back in upstream order until
checked, then what it releases in its place."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

from gateway.canonical import (
    Members,
    StreamEvent,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
)
from gateway.enforcement.check import StrictPlan
from gateway.enforcement.correct import finished_call
from gateway.enforcement.held import HeldEvent
from gateway.errors import GatewayError

TEXT = -1  # index of the held-text pseudo call
MISSING = -2  # the place of a call tool_choice requires, while it is corrected


class HeldSlot:
    """One held strict call (or the held text of a strict ``response_format``)."""

    __slots__ = (
        "call_id", "done", "early", "index", "members", "name", "namespace", "open", "out",
        "parts", "tokens",
    )  # fmt: skip

    def __init__(
        self,
        index: int,
        call_id: str,
        name: str,
        namespace: str | None = None,
        members: Members | None = None,
    ) -> None:
        self.index = index
        self.call_id = call_id
        self.name = name
        self.namespace = namespace
        self.members = members
        self.parts: list[str] = []
        self.tokens: list[TokenLogprob] = []  # held text's logprobs, when the upstream sent them
        self.open = True
        self.early = False  # released on a complete object, before the call formally closed
        self.done = False
        self.out: list[StreamEvent] = []

    def call(self) -> ToolCall:
        return ToolCall(
            id=self.call_id,
            name=self.name,
            raw_arguments="".join(self.parts),
            namespace=self.namespace,
            members=self.members,
        )

    def release(self, call: ToolCall, plan: StrictPlan) -> None:
        call = finished_call(call, plan)
        self.out = [
            ToolCallStart(self.index, self.call_id, call.name, self.namespace, call.members)
        ]
        if call.raw_arguments:
            self.out.append(ToolCallDelta(self.index, call.raw_arguments))
        self.done = True


Spawn = Callable[[HeldSlot, Awaitable[None]], None]
"""Run a slot's correction as a task the hold-back waits on while the stream flows."""

Explain = Callable[[GatewayError, "str | None"], "str | None"]
"""``tool_error``'s words for a failed correction (its tool; None: a required call), or None
when the error is to be raised."""


def emit(queue: deque[StreamEvent | HeldSlot], event: StreamEvent, out: list[HeldEvent]) -> None:
    """Pass an event on: out now, or behind the held slot ahead of it (upstream order)."""
    if queue:
        queue.append(event)
    else:
        out.append(event)
