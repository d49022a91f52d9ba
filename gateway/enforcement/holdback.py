"""Streaming hold-back: strict tool-call fragments are released only after the call validated
(spec: "in strict mode argument fragments are held back until the whole call has
been validated").

Dialect-neutral: it consumes an upstream's canonical events and yields *batches* of
canonical events for a dialect to encode (one batch = one socket write)::

    hb = holdback_for(request, ctx, upstream.stream(request, model))
    try:
        async for batch in hb.batches():
            send(encode(batch))              # the first batch may be empty: upstream answered
    except GatewayError as exc:
        send(encode_error(exc))              # in-band once bytes went out

Rules, in upstream order:

- Text deltas and non-strict tool calls go out as they arrive.
- A *held* call (a strict tool, or an unknown tool name while the request has strict tools)
  is buffered whole, ``ToolCallStart`` included. As soon as its arguments form a complete
  object that validates, it is released (start + the joined arguments). Otherwise it closes
  when another call starts or the upstream finishes, and is checked then: valid -> released;
  invalid -> the single correction, while the stream keeps flowing. The corrected call is
  released under the original ``index`` and ``id``.
- Output order equals upstream order: anything that arrived after a held call waits behind
  it. Tool calls are therefore released in index order, which the openai SDK needs (its
  stream accumulator inserts by list position, so index 1 before index 0 corrupts both),
  and text after a call stays after it (Anthropic content blocks are ordered).
- With a strict ``response_format`` and no tool call, the text is held whole, validated
  and corrected once, then released as one delta. A reply with no text at all is checked
  too (it is no JSON value), as it is when not streamed. A refusal (``RefusalDelta``, or a
  ``Finish`` that says ``refused``) is not validated: held text is released as it is (as
  the refusal's own words when the upstream refused without refusal deltas).
- Refusal deltas and ``WireEvent``s (what the gateway passes through without
  interpreting) go out in upstream order, as text does.
- When ``tool_choice`` requires a call (``StrictPlan.call_required``) and the answer ends
  without one, the finish waits behind the one correction, whose calls are released in
  its place (finish ``tool_calls``); under a named tool, a call to another tool is held
  and corrected into the named one.
- A call still invalid after its correction, a ``length`` cut-off inside a held call, a
  required call still missing, or an upstream failure raise ``GatewayError``; held
  arguments are never released. With ``on_invalid = "tool_error"`` the tool failures
  become a ``TextDelta`` in the call's place instead (``stop`` when no call is left). Pending
  corrections and the upstream iterator are cancelled/closed on error, on ``aclose()``
  and on task cancellation (client disconnect).

Usage goes to the request's ``Tally`` (first call + corrections); the last batch ends with
``FinalUsage`` carrying the total and ``schema_retries``.

What a hold-back yields (``HeldEvent``) and the preamble hold (``until_output``) are in
``gateway.enforcement.held``; the stages ``HoldBack`` routes the events to are in
``holdback_calls`` (the per-call hold), ``holdback_finish`` (the checks at the finish) and
``holdback_slot`` (a held slot).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Finish,
    FinishReason,
    Logprobs,
    Reasoning,
    RefusalDelta,
    StreamEvent,
    TextDelta,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
    WireEvent,
)
from gateway.context import Tally
from gateway.enforcement.check import StrictPlan
from gateway.enforcement.correct import (
    EnforceContext,
    correct_missing,
    enforce_call,
    enforce_output,
    tool_error_text,
)
from gateway.enforcement.held import Choice, FinalUsage, HeldEvent, shows_output, until_output
from gateway.enforcement.holdback_calls import CallEnforcer, CallHold
from gateway.enforcement.holdback_finish import FinishChecks, MissingEnforcer, OutputEnforcer
from gateway.enforcement.holdback_slot import TEXT, Corrections, HeldSlot, ToolErrorText, emit
from gateway.errors import UpstreamError

_END = object()


async def _next(it: AsyncIterator[StreamEvent]) -> StreamEvent | object:
    try:
        return await anext(it)
    except StopAsyncIteration:
        return _END


class HoldBack:
    """The hold-back over one upstream stream (see module docstring).

    Readable at any time (e.g. after a disconnect): ``tally``, ``usage_reported``,
    ``finish_reason``, ``estimated_completion_tokens``.
    """

    def __init__(
        self,
        events: AsyncIterator[StreamEvent],
        *,
        plan: StrictPlan,
        tally: Tally,
        enforce_call: CallEnforcer,
        enforce_output: OutputEnforcer | None = None,
        enforce_missing: MissingEnforcer | None = None,
        tool_error_text: ToolErrorText | None = None,
        prompt_tokens_estimate: int = 0,
    ) -> None:
        self.prompt_tokens_estimate = prompt_tokens_estimate
        self._events = events
        self._strict = plan.tools
        self._hold_text = plan.output is not None
        self.tally = tally
        # A call tool_choice requires: the answer's text is kept for its correction.
        enforce_missing = enforce_missing if plan.call_required else None
        self._requires_call = enforce_missing is not None
        self._said: list[str] = []
        self._queue: deque[StreamEvent | HeldSlot] = deque()
        self._fixes = fixes = Corrections(tool_error_text)
        self._tasks = fixes.tasks
        self._calls = CallHold(plan, self._queue, fixes, enforce_call=enforce_call)
        self._finish = FinishChecks(
            plan,
            self._queue,
            self._said,
            fixes,
            enforce_output=enforce_output,
            enforce_missing=enforce_missing,
        )
        self._text: HeldSlot | None = None
        self._refused = False  # the upstream refused: held text is not validated
        # The answer's reasoning so far, for the corrections (``holdback_for``).
        self.reasoning: tuple[Reasoning, ...] = ()
        self._refusal_deltas = False
        self._finished = False
        self.finish_reason: FinishReason | None = None
        self.usage_reported = False
        self._chars = 0

    @property
    def refusable(self) -> bool:
        """Whether this stream can end in a 422 (a strict tool or a strict output)."""
        return bool(self._strict) or self._hold_text

    @property
    def estimated_completion_tokens(self) -> int:
        """A rough count (4 characters a token) of what the upstream has sent so far."""
        return (self._chars + 3) // 4

    def account_partial(self) -> bool:
        """After a disconnect or failure (or a stream without usage): if the upstream never
        reported usage, put an estimate into the tally. True when the figures are estimated.
        """
        if self.usage_reported:
            return False
        self.tally.add_first(
            Usage(self.prompt_tokens_estimate, self.estimated_completion_tokens, estimated=True)
        )
        self.usage_reported = True
        return True

    async def events(self) -> AsyncGenerator[HeldEvent, None]:
        """The same as ``batches()``, flattened."""
        async for batch in self.batches():
            for event in batch:
                yield event

    async def batches(self) -> AsyncGenerator[list[HeldEvent], None]:
        """Batches to send, in order. The first is yielded as soon as the upstream's first
        event arrived (possibly empty: the commit point for response headers); the last ends
        with ``FinalUsage``. Raises ``GatewayError``."""
        it = self._events
        nxt: asyncio.Task[StreamEvent | object] | None = None
        upstream_done = False
        first = True
        try:
            while True:
                out: list[HeldEvent] = []
                if not self._tasks:
                    # Fast path (no correction in flight): no task per upstream event. A read
                    # started while a correction was in flight is awaited, never doubled: a
                    # second ``anext`` on the upstream's generator while the first is still
                    # pending raises "asynchronous generator is already running".
                    if nxt is not None:
                        event, nxt = await nxt, None
                    else:
                        event = await _next(it)
                    upstream_done = self._feed(event, out)
                else:
                    waiting: set[asyncio.Future[Any]] = set(self._tasks)
                    if not upstream_done:
                        if nxt is None:
                            nxt = asyncio.ensure_future(_next(it))
                        waiting.add(nxt)
                    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                    if nxt is not None and nxt in done:
                        event, nxt = nxt.result(), None
                        upstream_done = self._feed(event, out)
                    for task in done:
                        if self._tasks.pop(task, None) is not None:  # type: ignore[call-overload]
                            task.result()  # re-raises the 422 / upstream error
                self._flush(out)
                if upstream_done and not self._tasks:
                    if self._queue:  # pragma: no cover - every slot is closed at the end
                        raise RuntimeError("hold-back ended with unreleased events")
                    out.append(self._final())
                    yield out
                    return
                if out or first:
                    first = False
                    yield out
        finally:
            await self._cancel(nxt)

    async def _cancel(self, nxt: asyncio.Task[StreamEvent | object] | None) -> None:
        pending: list[asyncio.Future[Any]] = [*self._tasks]
        if nxt is not None:
            pending.append(nxt)
        self._tasks.clear()
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    def _final(self) -> FinalUsage:
        estimated = self.account_partial()
        tally = self.tally
        return FinalUsage(tally.total, tally.retries, tally.calls, estimated)

    # -- upstream events -------------------------------------------------------------

    def _feed(self, event: StreamEvent | object, out: list[HeldEvent]) -> bool:
        """Route one upstream event; returns True when the upstream is done."""
        if isinstance(event, TextDelta):
            self._chars += len(event.text)
            if self._finished:
                return False
            if event.text:
                self._fixes.texted = True
                if self._requires_call:
                    self._said.append(event.text)
            if self._hold_text:
                if self._text is None:
                    self._text = HeldSlot(TEXT, "", "")
                    self._queue.append(self._text)
                self._text.parts.append(event.text)
                if event.logprobs:
                    self._text.tokens.extend(event.logprobs)
            else:
                emit(self._queue, event, out)
        elif isinstance(event, ToolCallDelta):
            self._chars += len(event.arguments)
            self._calls.delta(event, out)
        elif isinstance(event, RefusalDelta):
            self._chars += len(event.text)
            if not self._finished:
                self._refused = self._refusal_deltas = True
                emit(self._queue, event, out)
        elif isinstance(event, WireEvent):
            if event.reasoning is not None:
                self.reasoning = (*self.reasoning, event.reasoning)
            if event.client_call:  # a custom tool's call: a tool turn, as a function call
                self._calls.saw_call = self._calls.client_call = True
            if not self._finished:
                emit(self._queue, event, out)
        elif isinstance(event, ToolCallStart):
            self._calls.start(event, out)
        elif isinstance(event, Finish):
            self._on_finish(event)
        elif isinstance(event, UsageReport):
            if self.usage_reported:
                self.tally.first_usage = self.tally.first_usage + event.usage
            else:
                self.tally.add_first(event.usage)
                self.usage_reported = True
        elif event is _END:
            if not self._finished:
                raise UpstreamError("The upstream stream ended before the reply was complete.")
            return True
        return False

    def _on_finish(self, event: Finish) -> None:
        if self._finished:
            return
        self._finished = True
        self.finish_reason = event.reason
        self._refused = self._refused or event.refused
        cut: FinishReason | None = "length" if event.reason == "length" else None
        self._calls.close_open(cut)
        if self._requires_call and not self._calls.saw_call and not self._refused:
            self._finish.await_call(self._text, event)
            return
        if self._hold_text and self._text is None and not self._calls.saw_call:
            self._text = HeldSlot(TEXT, "", "")  # no text at all: no JSON value either
            self._queue.append(self._text)
        if self._text is not None:
            self._finish.close_text(
                self._text,
                event.reason,
                refused=self._refused,
                refusal_deltas=self._refusal_deltas,
                saw_call=self._calls.saw_call,
            )
        self._queue.append(event)

    # -- releasing in upstream order -----------------------------------------------

    def _flush(self, out: list[HeldEvent]) -> None:
        queue = self._queue
        while queue:
            head = queue[0]
            if isinstance(head, HeldSlot):
                if not head.done:
                    return
                out.extend(head.out)
            elif isinstance(head, Finish) and self._calls.dropped and self._calls.all_dropped():
                # every call was dropped (tool_error): a text turn now
                out.append(Finish("stop", head.stop_sequence, head.refused))
            else:
                out.append(head)
            queue.popleft()


def holdback_for(
    request: ChatRequest,
    ctx: EnforceContext,
    events: AsyncIterator[StreamEvent],
) -> HoldBack:
    """A hold-back wired to the shared enforcement: ``enforce_call`` (the single
    correction, same as non-streaming) and ``enforce_output`` for a strict
    ``response_format``. ``ctx.tally`` receives every call's usage."""

    async def missing(text: str, reason: FinishReason) -> ChatResponse:
        reply = ChatResponse(
            id="",
            model=request.model,
            content=text or None,
            tool_calls=(),
            finish_reason=reason,
            usage=Usage(),
            reasoning=hold.reasoning,
        )
        return await correct_missing(reply, request, ctx)

    def words(exc: BaseException, tool: str | None) -> str | None:
        return tool_error_text(exc, tool, ctx)

    async def one_call(call: ToolCall, cut: FinishReason | None) -> ToolCall:
        return await enforce_call(call, request, ctx, finish_reason=cut, reasoning=hold.reasoning)

    async def output(
        text: str, reason: FinishReason, tokens: tuple[TokenLogprob, ...] | None
    ) -> TextDelta | RefusalDelta:
        reply = ChatResponse(
            id="",
            model=request.model,
            content=text or None,
            tool_calls=(),
            finish_reason=reason,
            usage=Usage(),
            logprobs=Logprobs(tokens) if tokens else None,
            reasoning=hold.reasoning,
        )  # no text: "the reply has no content", as when not streamed
        fixed = await enforce_output(reply, request, ctx)
        lp = fixed.logprobs
        if fixed.refusal is not None:
            return RefusalDelta(fixed.refusal, lp.refusal if lp else None)
        return TextDelta(fixed.content or "", lp.content if lp else None)

    hold = HoldBack(
        events,
        plan=ctx.plan,
        tally=ctx.tally,
        enforce_call=one_call,
        enforce_output=output if ctx.plan.output is not None else None,
        enforce_missing=missing,
        tool_error_text=words if ctx.shows_tool_errors else None,
    )
    return hold


__all__ = [
    "CallEnforcer",
    "Choice",
    "FinalUsage",
    "HeldEvent",
    "HoldBack",
    "OutputEnforcer",
    "holdback_for",
    "shows_output",
    "until_output",
]
