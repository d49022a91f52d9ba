"""A hold-back's held slot: a strict call (or held text) kept back in upstream order until
checked, then what it releases in its place; the corrections that fill slots as tasks."""

from __future__ import annotations

import asyncio
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
        "call_id",
        "done",
        "early",
        "index",
        "members",
        "name",
        "namespace",
        "open",
        "out",
        "parts",
        "tokens",
    )

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


ToolErrorText = Callable[[BaseException, "str | None"], "str | None"]
"""``on_invalid = "tool_error"``: the words for a call dropped (its tool; None: a required
call missing), or None when the error is to be raised."""


class Corrections:
    """The corrections a hold-back waits on while the stream flows, each filling its slot,
    and ``tool_error``'s words for one that failed."""

    __slots__ = ("_tool_error_text", "tasks", "texted")

    def __init__(self, tool_error_text: ToolErrorText | None) -> None:
        self.tasks: dict[asyncio.Task[None], HeldSlot] = {}
        self.texted = False  # text went out (a dropped call's words then start a paragraph)
        self._tool_error_text = tool_error_text

    def spawn(self, slot: HeldSlot, work: Awaitable[None]) -> None:
        self.tasks[asyncio.ensure_future(work)] = slot

    def explain(self, exc: GatewayError, tool: str | None) -> str | None:
        """``tool_error``'s words for ``exc`` (a paragraph of its own after text), or None."""
        if self._tool_error_text is None:
            return None
        said = self._tool_error_text(exc, tool)
        if said is None:
            return None
        return f"\n\n{said}" if self.texted else said


def emit(queue: deque[StreamEvent | HeldSlot], event: StreamEvent, out: list[HeldEvent]) -> None:
    """Pass an event on: out now, or behind the held slot ahead of it (upstream order)."""
    if queue:
        queue.append(event)
    else:
        out.append(event)
