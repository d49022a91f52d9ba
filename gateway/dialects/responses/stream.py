"""Canonical stream events -> the Responses API's server-sent events.

The sequence, as the API sends it and the ``openai`` SDK's ``responses.stream`` checks it
(every event names its ``type`` twice, in ``event:`` and in the data, and carries a
``sequence_number`` counting from 0)::

    response.created / response.in_progress        (status "in_progress", no output yet)
      response.output_item.added                    (a message, status "in_progress")
        response.content_part.added                 (output_text, empty)
        response.output_text.delta*
        (response.output_text.annotation.added*      (a Responses upstream's, as sent))
        response.output_text.done
        response.content_part.done
        (response.content_part.added                (a refusal: its own part, refusal "")
         response.refusal.delta*
         response.refusal.done
         response.content_part.done)
      response.output_item.done                     (the message, completed)
      response.output_item.added                    (a function_call, empty arguments;
        response.function_call_arguments.delta*      ``namespace`` when its tool is in one)
        response.function_call_arguments.done
      response.output_item.done
      response.output_item.added                    (any other item of a Responses
        ...its own events, as the upstream sent them  upstream: reasoning, a hosted tool's
      response.output_item.done                      call, a custom tool call)
    response.completed                              (the whole response, usage included;
                                                     response.incomplete on a length cut)

The encoder only sees what the hold-back released, so a strict call's item is added only
once its arguments validated (or were corrected). A failure after the first event is
``response.failed`` (the response with ``error``) followed by one ``error`` event that
carries the unified envelope beside the event's own fields; the SDK raises
``openai.APIError`` on it, with ``code`` and ``param`` from the envelope.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.canonical import (
    DEFAULT_REFUSAL,
    Finish,
    FinishReason,
    Members,
    RefusalDelta,
    TextDelta,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
    WireEvent,
)
from gateway.dialects.responses.encode import (
    ResponseShape,
    annotation,
    encode_usage,
    function_call_item,
    output_text,
    refusal_part,
    status_of,
)
from gateway.enforcement.holdback import Choice, FinalUsage, HeldEvent
from gateway.errors import GatewayError, UpstreamError

__all__ = ["KEEPALIVE", "ResponseStreamEncoder"]

KEEPALIVE = b": keep-alive\n\n"


class _Part:
    """A content part of the message being streamed: its kind, text and logprobs so far."""

    __slots__ = ("at", "kind", "notes", "pieces", "tokens")

    def __init__(self, kind: str, at: int = 0) -> None:
        self.kind = kind
        self.at = at  # where its text starts in the answer's text
        self.pieces: list[str] = []
        self.tokens: list[TokenLogprob] = []
        self.notes: list[dict[str, Any]] = []  # a Responses upstream's annotations

    def done(self) -> dict[str, Any]:
        text = "".join(self.pieces)
        if self.kind == "output_text":
            return output_text(text, tuple(self.tokens), self.notes)
        return refusal_part(text)


class _Message:
    """The message item still being streamed: its position, id, its content parts so
    far (``output_text`` or ``refusal``) and a Responses upstream's own members of it
    (``phase``)."""

    __slots__ = ("id", "index", "members", "parts")

    def __init__(self, index: int, item_id: str, members: dict[str, Any] | None = None) -> None:
        self.index = index
        self.id = item_id
        self.members = members or {}
        self.parts: list[_Part] = []

    def item(self, status: str) -> dict[str, Any]:
        content = [part.done() for part in self.parts]
        item = {
            "type": "message",
            "id": self.id,
            "role": "assistant",
            "status": status,
            "content": content,
        }
        return {**item, **{k: v for k, v in self.members.items() if k not in item}}


class _Item:
    """A function call item still being streamed: its position, id, call and arguments
    so far."""

    __slots__ = ("call_id", "id", "index", "members", "name", "namespace", "parts")

    def __init__(
        self,
        index: int,
        item_id: str,
        call_id: str,
        name: str,
        namespace: str | None,
        members: Members | None = None,
    ) -> None:
        self.index = index
        self.id = item_id
        self.call_id = call_id
        self.name = name
        self.namespace = namespace
        self.members = members
        self.parts: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.parts)


class ResponseStreamEncoder:
    """Encodes one streamed response. Not thread-safe; one per response."""

    __slots__ = (
        "_calls",
        "_chars",
        "_closed_calls",
        "_finish",
        "_kept",
        "_members",
        "_output",
        "_passing",
        "_refused",
        "_retries",
        "_said",
        "_seq",
        "_text",
        "_tier",
        "_usage",
        "final",
        "shape",
    )

    def __init__(self, shape: ResponseShape) -> None:
        self.shape = shape
        self._seq = 0
        self._output: list[dict[str, Any]] = []  # finished items, by output_index
        self._text: _Message | None = None
        self._chars = 0  # characters of text sent so far
        self._members: dict[str, Any] | None = None  # for the next message item (phase)
        self._refused = False  # the upstream's Finish said so
        self._said = False  # a refusal part was sent
        self._passing: dict[int, int] = {}  # the upstream's open passed-through item -> ours
        self._tier: Any = None  # the upstream's service_tier
        self._kept: dict[str, Any] | None = None  # a Responses upstream's own members
        self._calls: dict[int, _Item] = {}  # canonical call index -> open item
        self._closed_calls: set[int] = set()
        self._finish: FinishReason = "stop"
        self._usage = Usage()
        self._retries = 0
        self.final: dict[str, Any] | None = None  # the response.completed body, once sent

    def _event(self, kind: str, payload: dict[str, Any]) -> bytes:
        payload["type"] = kind
        payload["sequence_number"] = self._seq
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _next_index(self) -> int:
        return len(self._output) + (self._text is not None) + len(self._calls) + len(self._passing)

    def _passed(self, event: WireEvent) -> bytes:
        """An event of an item the gateway passes through (a reasoning item's summary, a
        hosted tool's progress, a custom call's input: added, its own events, done) as the
        upstream sent it, at this response's output index and sequence number."""
        data = dict(event.data)
        kind = str(data.pop("type"))
        data.pop("sequence_number", None)
        upstream = int(data.get("output_index", -1))
        if kind == "response.output_item.added":
            out = self._close_text() + self._close_calls()  # the item before it is over
            index = self._passing[upstream] = self._next_index()
            return out + self._event(kind, {**data, "output_index": index})
        found = self._passing.get(upstream)
        if found is None:
            if kind != "response.output_item.done":
                return b""
            # Done without added (an upstream that sends the item whole): both, in place.
            out = self._close_text() + self._close_calls()
            found = self._next_index()
            self._output.append(data["item"])
            where = {**data, "output_index": found}
            return (
                out
                + self._event("response.output_item.added", dict(where))
                + self._event(kind, where)
            )
        if kind == "response.output_item.done":
            del self._passing[upstream]
            self._output.append(data["item"])
        return self._event(kind, {**data, "output_index": found})

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress``."""
        body = self.shape.body(status="in_progress", output=[], usage=None)
        return self._event("response.created", {"response": body}) + self._event(
            "response.in_progress", {"response": body}
        )

    # -- items --------------------------------------------------------------------------

    def _open_text(self) -> bytes:
        members, self._members = self._members, None
        item = self._text = _Message(self._next_index(), self.shape.item_id("msg"), members)
        return self._event(
            "response.output_item.added",
            {
                "output_index": item.index,
                "item": item.item("in_progress"),
            },
        )

    def _part(self, kind: str) -> tuple[_Part, _Message, int, bytes]:
        """The open message's last part if it is a ``kind`` part, else a new one (the
        previous part closed first)."""
        out = self._close_calls()  # text after a call: the call is over (upstream order)
        if self._text is None:
            out += self._open_text()
        item = self._text
        assert item is not None
        if not item.parts or item.parts[-1].kind != kind:
            out += self._close_part(item)
            item.parts.append(_Part(kind, self._chars))
            empty = output_text("") if kind == "output_text" else refusal_part("")
            out += self._event(
                "response.content_part.added",
                {
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": len(item.parts) - 1,
                    "part": empty,
                },
            )
        return item.parts[-1], item, len(item.parts) - 1, out

    def _close_part(self, item: _Message) -> bytes:
        if not item.parts:
            return b""
        index = len(item.parts) - 1
        part = item.parts[index]
        done = part.done()
        where = {"item_id": item.id, "output_index": item.index, "content_index": index}
        if part.kind == "output_text":
            out = self._event(
                "response.output_text.done",
                {
                    **where,
                    "text": done["text"],
                    "logprobs": done["logprobs"],
                },
            )
        else:
            out = self._event("response.refusal.done", {**where, "refusal": done["refusal"]})
        return out + self._event("response.content_part.done", {**where, "part": done})

    def _close_text(self, status: str = "completed") -> bytes:
        item, self._text = self._text, None
        if item is None:
            return b""
        out = self._close_part(item)
        done = item.item(status)
        self._output.append(done)
        return out + self._event(
            "response.output_item.done", {"output_index": item.index, "item": done}
        )

    def _close_calls(self) -> bytes:
        out = b""
        for index in sorted(self._calls, key=lambda i: self._calls[i].index):
            item = self._calls.pop(index)
            self._closed_calls.add(index)
            arguments = item.text
            out += self._event(
                "response.function_call_arguments.done",
                {
                    "item_id": item.id,
                    "output_index": item.index,
                    "arguments": arguments,
                },
            )
            call = ToolCall(item.call_id, item.name, arguments, members=item.members)
            done = function_call_item(item.id, call, namespace=item.namespace)
            self._output.append(done)
            out += self._event(
                "response.output_item.done", {"output_index": item.index, "item": done}
            )
        return out

    def text(self, delta: str, logprobs: tuple[TokenLogprob, ...] | None = None) -> bytes:
        if not delta:
            return b""
        part, item, index, out = self._part("output_text")
        part.pieces.append(delta)
        self._chars += len(delta)
        if logprobs:
            part.tokens.extend(logprobs)
        return out + self._event(
            "response.output_text.delta",
            {
                "item_id": item.id,
                "output_index": item.index,
                "content_index": index,
                "delta": delta,
                "logprobs": list(logprobs) if logprobs else [],
            },
        )

    def annotation(self, note: dict[str, Any]) -> bytes:
        """A Responses upstream's annotation of the text part being streamed, as sent."""
        part, item, index, out = self._part("output_text")
        part.notes.append(note)
        return out + self._event(
            "response.output_text.annotation.added",
            {
                "item_id": item.id,
                "output_index": item.index,
                "content_index": index,
                "annotation_index": len(part.notes) - 1,
                "annotation": note,
            },
        )

    def _translated(self, event: WireEvent) -> bytes:
        """Another wire's web citations, as ``url_citation`` annotations of the text part
        they fall in (the one being streamed)."""
        part = self._text.parts[-1] if self._text is not None and self._text.parts else None
        if part is None or part.kind != "output_text":
            return b""
        notes = (annotation(c, part.at) for c in event.citations if c.link)
        return b"".join(self.annotation(n) for n in notes if n is not None)

    def refusal(self, delta: str) -> bytes:
        if not delta:
            return b""
        self._said = True
        part, item, index, out = self._part("refusal")
        part.pieces.append(delta)
        return out + self._event(
            "response.refusal.delta",
            {
                "item_id": item.id,
                "output_index": item.index,
                "content_index": index,
                "delta": delta,
            },
        )

    def tool_start(self, event: ToolCallStart) -> bytes:
        out = self._close_text()
        namespace = self.shape.namespace(event.name, event.namespace)
        item = _Item(
            self._next_index(),
            self.shape.item_id("fc"),
            event.id,
            event.name,
            namespace,
            event.members,
        )
        self._calls[event.index] = item
        call = ToolCall(event.id, event.name, "", members=event.members)
        return out + self._event(
            "response.output_item.added",
            {
                "output_index": item.index,
                "item": function_call_item(item.id, call, "in_progress", namespace),
            },
        )

    def tool_arguments(self, event: ToolCallDelta) -> bytes:
        if not event.arguments:
            return b""
        item = self._calls.get(event.index)
        if item is None:
            raise UpstreamError(
                "The upstream sent tool call arguments after the call had ended.",
                code="upstream_invalid_response",
            )
        item.parts.append(event.arguments)
        return self._event(
            "response.function_call_arguments.delta",
            {
                "item_id": item.id,
                "output_index": item.index,
                "delta": event.arguments,
            },
        )

    # -- batches and the end ------------------------------------------------------------

    def encode(self, batch: Sequence[HeldEvent]) -> bytes:
        """The bytes of one hold-back batch (one socket write)."""
        parts: list[bytes] = []
        for event in batch:
            if isinstance(event, TextDelta):
                parts.append(self.text(event.text, event.logprobs))
            elif isinstance(event, RefusalDelta):
                parts.append(self.refusal(event.text))
            elif isinstance(event, ToolCallStart):
                parts.append(self.tool_start(event))
            elif isinstance(event, ToolCallDelta):
                parts.append(self.tool_arguments(event))
            elif isinstance(event, Finish):
                self._finish = event.reason
                self._refused = self._refused or event.refused
            elif isinstance(event, FinalUsage):
                self._usage = event.usage
                self._retries = event.schema_retries
            elif isinstance(event, WireEvent):
                if event.kind == "fields":
                    if event.wire != "anthropic":
                        self._tier = event.data.get("service_tier")
                    if event.wire == "responses":
                        self._kept = dict(event.data)
                elif event.wire == "responses" and event.kind == "message":
                    # The upstream's next message, with members of its own: a message of
                    # its own here too.
                    parts.append(self._close_text())
                    self._members = dict(event.data)
                elif event.wire == "responses" and event.kind == "annotation":
                    parts.append(self.annotation(dict(event.data["annotation"])))
                elif event.wire != "responses" and event.citations:
                    parts.append(self._translated(event))
                elif event.wire == "responses":
                    parts.append(self._passed(event))
            elif isinstance(event, UsageReport | Choice):
                continue  # the hold-back totals usage; one choice only here
        return b"".join(parts)

    def finish(self) -> bytes:
        """Close the open items, then ``response.completed`` (``response.incomplete`` on a
        length or content-filter cut) with the whole response."""
        status, incomplete = status_of(self._finish)
        # A refusal without words of its own (Anthropic's) still says it is one.
        out = self.refusal(DEFAULT_REFUSAL) if self._refused and not self._said else b""
        out += self._close_text("completed" if status == "completed" else "incomplete")
        out += self._close_calls()
        self.final = self.shape.body(
            status=status,
            output=self._output,
            usage=encode_usage(self._usage, self._retries),
            incomplete_details=incomplete,
            completed_at=int(time.time()) if status == "completed" else None,
            service_tier=self._tier,
            kept=self._kept,
        )
        kind = "response.completed" if status == "completed" else "response.incomplete"
        return out + self._event(kind, {"response": self.final})

    def failed(self, exc: GatewayError, request_id: str) -> bytes:
        """``response.failed`` then the ``error`` event with the unified envelope."""
        envelope = exc.envelope(request_id)
        body = self.shape.body(
            status="failed",
            output=list(self._output),
            usage=None,
            error={"code": exc.code, "message": exc.message, "param": exc.param, "type": exc.type},
        )
        out = self._event("response.failed", {"response": body})
        return out + self._event(
            "error",
            {
                "code": exc.code,
                "message": exc.message,
                "param": exc.param,
                **envelope,
            },
        )
