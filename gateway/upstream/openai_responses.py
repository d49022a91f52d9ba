"""The Responses wire format for an OpenAI-compatible upstream (``api = "responses"``).

A model whose upstream speaks ``POST {base_url}/responses`` (OpenAI's newest models, and
servers that only offer that API) is reached with this codec instead of chat completions;
the adapter (``gateway.upstream.openai``) is the same, so retries, limits and errors are
too. Canonical -> request: messages become input items (``function_call`` /
``function_call_output`` for tool turns), every tool states ``strict`` (the API's default
is strict, and the gateway decides what is strict), ``store`` is false (the gateway keeps
what it stores itself). Answer -> canonical: ``message`` text, ``function_call`` items
(their ``namespace`` kept), ``status``/``incomplete_details`` as the finish reason,
``usage``; ``reasoning`` items (``Reasoning``), hosted tools' items and custom calls
(``WireItem``) kept whole, in their place (``ChatResponse.layout``; streamed, their
events as ``WireEvent``s).

What else a client's request carries goes as the field policy says
(``gateway.dialects.policy``, through ``Screen.carried``): ``reasoning_effort`` becomes
``reasoning.effort``, ``verbosity`` ``text.verbosity``; ``seed`` or ``logit_bias`` are
dropped with notice, ``stop`` is refused.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Citation,
    Finish,
    FinishReason,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    Logprobs,
    Members,
    Message,
    Passthrough,
    Reasoning,
    RefusalDelta,
    Slot,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
    WireEvent,
    WireItem,
    answer_layout,
    usage_kept,
)
from gateway.settings import ModelConfig
from gateway.upstream.carried import carry_over
from gateway.upstream.errors import (
    OutputTooLarge,
    UpstreamInvalidResponse,
    UpstreamReportedError,
    reported_code,
)
from gateway.upstream.redact import scrub
from gateway.upstream.tokens import estimated_usage

_ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})
# The items the gateway reads; every other item passes through whole, with its own events.
_OWN_ITEMS = frozenset({"message", "function_call"})
# An upstream's event name goes into the client's ``event:`` line: only names of this
# shape pass (no line break, no space).
_EVENT_NAME = re.compile(r"response(?:\.[a-z0-9_]+)+")

# Output items of calls the client runs: the turn waits on the client, as for a function call.
_CLIENT_CALLS = frozenset(
    {
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "mcp_approval_request",
    }
)

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def _content(message: Message, *, assistant: bool) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in message.content):
        return message.text
    out: list[dict[str, Any]] = []
    for p in message.content:
        if isinstance(p, TextPart):
            out.append({"type": "output_text" if assistant else "input_text", "text": p.text})
        elif isinstance(p, ImagePart):
            url = p.url or f"data:{p.media_type or 'image/png'};base64,{p.data or ''}"
            out.append({"type": "input_image", "image_url": url, "detail": p.detail or "auto"})
    return out


def _call_item(call: ToolCall) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.raw_arguments,
    }
    if call.namespace is not None:
        item["namespace"] = call.namespace
    return item


def encode_items(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Canonical messages -> Responses input items."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id or "", "output": m.text}
            )
            continue
        # Reasoning items first, as sent (id, encrypted_content); another provider's has no
        # place here.
        items.extend(dict(r.raw) for r in m.reasoning if r.wire == "responses")
        if m.content or not (m.tool_calls or m.reasoning):
            items.append(
                {
                    "type": "message",
                    "role": m.role,
                    "content": _content(m, assistant=m.role == "assistant"),
                }
            )
        items.extend(_call_item(c) for c in m.tool_calls)
    return items


def encode_request(request: ChatRequest, model: ModelConfig, *, stream: bool) -> dict[str, Any]:
    """Canonical request -> Responses request body for ``model.upstream_model``."""
    body: dict[str, Any] = {
        "model": model.upstream_model,
        "input": encode_items(request.messages),
        "store": False,
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "parameters": t.parameters,
                "strict": t.strict,
                **({"description": t.description} if t.description else {}),
            }
            for t in request.tools
        ]
    choice = request.tool_choice
    if isinstance(choice, ForcedTool):
        body["tool_choice"] = {"type": "function", "name": choice.name}
    elif choice is not None:
        body["tool_choice"] = choice
    rf = request.response_format
    if isinstance(rf, JsonSchemaFormat):
        fmt: dict[str, Any] = {
            "type": "json_schema",
            "name": rf.name,
            "schema": rf.schema,
            "strict": rf.strict,
        }
        if rf.description is not None:
            fmt["description"] = rf.description
        body["text"] = {"format": fmt}
    elif rf is not None:
        body["text"] = {"format": {"type": rf}}
    for key, value in (
        ("max_output_tokens", request.max_tokens),
        ("temperature", request.temperature),
        ("top_p", request.top_p),
        ("parallel_tool_calls", request.parallel_tool_calls),
        ("user", request.user),
    ):
        if value is not None:
            body[key] = value
    carry_over(body, request, "responses")
    if stream:
        body["stream"] = True
    return body


def _detail(raw: Mapping[str, Any], group: str, key: str) -> int:
    details = raw.get(group)
    return int(details.get(key) or 0) if isinstance(details, Mapping) else 0


def decode_usage(raw: Any) -> Usage | None:
    """A Responses ``usage`` object (``openai.types.responses.ResponseUsage``) ->
    canonical; None when the answer has none. ``input_tokens`` includes the cached ones."""
    if not isinstance(raw, Mapping) or not raw:
        return None
    return Usage(
        int(raw.get("input_tokens") or 0),
        int(raw.get("output_tokens") or 0),
        cache_read_tokens=_detail(raw, "input_tokens_details", "cached_tokens"),
        cache_creation_tokens=_detail(raw, "input_tokens_details", "cache_write_tokens"),
        reasoning_tokens=_detail(raw, "output_tokens_details", "reasoning_tokens"),
        kept=usage_kept("responses", raw, _USAGE_KNOWN),
    )


# The usage members the canonical counts read (a set: those members of a nested object).
_USAGE_KNOWN: Mapping[str, Any] = {
    "input_tokens": True,
    "output_tokens": True,
    "total_tokens": True,
    "input_tokens_details": frozenset({"cached_tokens", "cache_write_tokens"}),
    "output_tokens_details": frozenset({"reasoning_tokens"}),
}


def _finish(data: Mapping[str, Any], has_calls: bool) -> FinishReason:
    status = data.get("status")
    if status == "failed":
        error = data.get("error") or {}
        message = error.get("message") if isinstance(error, Mapping) else None
        raise UpstreamReportedError(
            f"Upstream response failed: {str(message)[:300]}", upstream_code=reported_code(error)
        )
    if status == "incomplete":
        details = data.get("incomplete_details") or {}
        return _INCOMPLETE.get(str(details.get("reason")), "length")
    return "tool_calls" if has_calls else "stop"


def reasoning_of(item: Mapping[str, Any]) -> Reasoning:
    """A ``reasoning`` output item, kept whole (``id``, ``summary``, ``encrypted_content``)."""
    summary = item.get("summary") or ()
    text = "".join(str(s.get("text") or "") for s in summary if isinstance(s, Mapping))
    return Reasoning("responses", dict(item), text)


# What the gateway writes itself of a response: its ids, status, output and usage, and
# its echo of the request settings it owns (tools with their strict schemas, text.format,
# store, ...). The rest (``service_tier``, ``reasoning`` with its ``summary``,
# ``truncation``, ``prompt_cache_key``, ...) a Responses client gets as the upstream said.
_RESPONSE_OWN = frozenset(
    {
        "id",
        "object",
        "created_at",
        "status",
        "output",
        "output_text",
        "usage",
        "error",
        "incomplete_details",
        "completed_at",
        "model",
        "store",
        "previous_response_id",
        "metadata",
        "tools",
        "tool_choice",
        "text",
        "instructions",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "background",
        "user",
        "conversation",
        "prompt",
    }
)


def response_members(data: Mapping[str, Any]) -> dict[str, Any]:
    """A response's top-level members the gateway does not write itself, as sent."""
    return {k: v for k, v in data.items() if k not in _RESPONSE_OWN and v is not None}


def _passthrough(data: Mapping[str, Any], messages: list[dict[str, Any]]) -> Passthrough | None:
    top = response_members(data)
    kept = tuple(messages) if any(messages) else ()
    return Passthrough("responses", top, messages=kept) if top or kept else None


# What the gateway writes itself of a message item; the rest (``phase``) rides along.
_MESSAGE_OWN = frozenset({"type", "id", "role", "status", "content"})


def message_members(item: Mapping[str, Any]) -> dict[str, Any]:
    """A message item's members the gateway does not write itself, as sent."""
    return {k: v for k, v in item.items() if k not in _MESSAGE_OWN and v is not None}


def _check_arguments(size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise OutputTooLarge(f"The model's tool-call arguments exceed the {limit} byte limit.")


# What the gateway reads of a ``function_call`` item (its ``id`` and ``status`` are the
# gateway's own); the rest (``caller``, ``async``) rides along for a Responses client.
_CALL_KNOWN = frozenset({"type", "id", "call_id", "name", "arguments", "status", "namespace"})


def _call(item: Mapping[str, Any]) -> ToolCall:
    namespace = item.get("namespace")
    extra = {k: v for k, v in item.items() if k not in _CALL_KNOWN}
    return ToolCall(
        id=str(item["call_id"]),
        name=str(item["name"]),
        raw_arguments=str(item.get("arguments") or ""),
        namespace=namespace if isinstance(namespace, str) else None,
        members=Members("responses", extra) if extra else None,
    )


def citations_of(raw: Any, at: int) -> list[Citation]:
    """An ``output_text`` part's ``annotations``, placed in the answer's whole text (the
    part starts at character ``at``)."""
    out: list[Citation] = []
    for note in raw if isinstance(raw, list) else ():
        if not isinstance(note, dict):
            continue
        start = note.get("start_index", note.get("index"))
        end = note.get("end_index", start)
        start = start if type(start) is int else 0
        end = end if type(end) is int else start
        out.append(Citation("responses", note, at + start, at + end))
    return out


def _client_runs(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return kind in _CLIENT_CALLS or (
        kind == "tool_search_call" and item.get("execution") == "client"
    )


def wire_item(item: Mapping[str, Any]) -> WireItem:
    """An output item the gateway does not interpret, kept whole."""
    return WireItem("responses", str(item.get("type")), dict(item), _client_runs(item))


def decode_response(
    data: Any,
    model: ModelConfig,
    *,
    max_argument_bytes: int | None = None,
    request_bytes: int = 0,
) -> ChatResponse:
    """A Responses ``response`` object -> canonical response. An answer without ``usage``
    is billed an estimate (``request_bytes``: the body sent). Items other than messages,
    function calls and reasoning (hosted tools' calls, custom tool calls) are kept whole,
    in their place (``ChatResponse.items``, ``layout``)."""
    try:
        texts: list[str] = []
        refusals: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[Reasoning] = []
        tokens: list[dict[str, Any]] = []
        items: list[WireItem] = []
        layout: list[Slot] = []
        citations: list[Citation] = []
        messages: list[dict[str, Any]] = []
        size = 0  # characters of text so far
        for item in data["output"]:
            kind = item.get("type")
            if kind == "reasoning":
                layout.append(("reasoning", len(reasoning)))
                reasoning.append(reasoning_of(item))
            elif kind == "message":
                messages.append(message_members(item))
                for part in item.get("content") or ():
                    if part.get("type") == "output_text":
                        texts.append(str(part["text"]))
                        citations.extend(citations_of(part.get("annotations"), size))
                        size += len(texts[-1])
                        tokens.extend(part.get("logprobs") or ())
                    elif part.get("type") == "refusal":
                        refusals.append(str(part["refusal"]))
                layout.append(("text", size))
            elif kind == "function_call":
                call = _call(item)
                _check_arguments(len(call.raw_arguments), max_argument_bytes)
                layout.append(("call", len(calls)))
                calls.append(call)
            elif isinstance(kind, str):
                layout.append(("item", len(items)))
                items.append(wire_item(item))
        usage = decode_usage(data.get("usage"))
        response = ChatResponse(
            id=str(data.get("id") or ""),
            model=str(data.get("model") or model.upstream_model),
            content="".join(texts) if texts else None,
            tool_calls=tuple(calls),
            finish_reason=_finish(data, bool(calls)),
            usage=usage or Usage(),
            created=int(data.get("created_at") or time.time()),
            refusal="".join(refusals) if refusals else None,
            reasoning=tuple(reasoning),
            logprobs=Logprobs(tuple(tokens)) if tokens else None,
            passthrough=_passthrough(data, messages),
            items=tuple(items),
            layout=answer_layout(layout, items),
            citations=tuple(citations),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise UpstreamInvalidResponse(
            f"Upstream returned an unexpected response shape ({type(exc).__name__})."
        ) from exc
    if usage is None:
        return dataclasses.replace(response, usage=estimated_usage(request_bytes, response))
    return response


class EventParser:
    """Responses SSE lines -> canonical events. ``done`` once the response ended."""

    __slots__ = (
        "_arg_bytes",
        "_calls",
        "_chars",
        "_part_start",
        "_passing",
        "_refusals",
        "_secret",
        "done",
        "max_argument_bytes",
    )

    def __init__(self, *, max_argument_bytes: int | None = None, secret: str | None = None) -> None:
        self.max_argument_bytes = max_argument_bytes
        self._secret = secret
        self._calls: dict[int, int] = {}  # output_index -> canonical call index
        self._arg_bytes: dict[int, int] = {}
        self._refusals: set[str] = set()  # item ids whose refusal came in deltas
        self._passing: set[int] = set()  # output indexes of the items passed through
        self._chars = 0  # characters of text so far
        self._part_start = 0  # where the output_text part being streamed starts
        self.done = False

    def feed_data(self, data: str) -> list[StreamEvent]:
        """One SSE event's data (its ``type`` names it; the ``event:`` line is redundant)."""
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamInvalidResponse("Upstream sent an invalid stream event.") from exc
        try:
            return self.feed_event(event)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise UpstreamInvalidResponse(
                f"Upstream sent a malformed stream event ({type(exc).__name__})."
            ) from exc

    def _arguments(self, index: int, text: str) -> list[StreamEvent]:
        if not text:
            return []
        self._arg_bytes[index] = self._arg_bytes.get(index, 0) + len(text)
        _check_arguments(self._arg_bytes[index], self.max_argument_bytes)
        return [ToolCallDelta(index, text)]

    def feed_event(self, event: Any) -> list[StreamEvent]:
        kind = event["type"]
        if kind == "response.output_text.delta":
            if not event["delta"]:
                return []
            tokens = event.get("logprobs")
            self._chars += len(str(event["delta"]))
            return [TextDelta(str(event["delta"]), tuple(tokens) if tokens else None)]
        if kind == "response.content_part.added":
            self._part_start = self._chars
            return []
        if kind in _ITEM_EVENTS and event["item"].get("type") not in _OWN_ITEMS:
            # Reasoning, hosted tools' and custom calls' items: a Responses client gets
            # them as sent, with their own events.
            item = event["item"]
            index = int(event["output_index"])
            opened = index not in self._passing
            self._passing.add(index)
            done = (
                reasoning_of(item)
                if kind == "response.output_item.done" and item.get("type") == "reasoning"
                else None
            )
            return [
                WireEvent(
                    "responses", "event", event, done, client_call=opened and _client_runs(item)
                )
            ]
        if "output_index" in event and int(event["output_index"]) in self._passing:
            if isinstance(kind, str) and _EVENT_NAME.fullmatch(kind):
                return [WireEvent("responses", "event", event)]
            return []
        if kind == "response.output_text.annotation.added":
            # A Responses client gets it in the text part it annotates, as sent.
            note = event.get("annotation")
            if not isinstance(note, dict):
                return []
            return [
                WireEvent(
                    "responses",
                    "annotation",
                    {"annotation": note},
                    citations=tuple(citations_of([note], self._part_start)),
                )
            ]
        if kind == "response.refusal.delta":
            self._refusals.add(str(event["item_id"]))
            return [RefusalDelta(str(event["delta"]))] if event["delta"] else []
        if kind == "response.refusal.done":
            item_id = str(event["item_id"])
            if item_id in self._refusals:
                return []
            self._refusals.add(item_id)  # a server that sends the refusal only here
            return [RefusalDelta(str(event["refusal"]))]
        if kind == "response.output_item.added" and event["item"]["type"] == "message":
            members = message_members(event["item"])
            # A Responses client gets the message's own members (``phase``) on its item.
            return [WireEvent("responses", "message", members)] if members else []
        if kind == "response.output_item.added" and event["item"]["type"] == "function_call":
            item = event["item"]
            index = self._calls[int(event["output_index"])] = len(self._calls)
            call = _call(item)
            start: list[StreamEvent] = [
                ToolCallStart(index, call.id, call.name, call.namespace, call.members)
            ]
            return start + self._arguments(index, str(item.get("arguments") or ""))
        if kind == "response.function_call_arguments.delta":
            return self._arguments(self._calls[int(event["output_index"])], str(event["delta"]))
        if kind == "response.function_call_arguments.done":
            index = self._calls[int(event["output_index"])]
            if index not in self._arg_bytes:  # a server that sends the arguments only here
                return self._arguments(index, str(event["arguments"]))
            return []
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response = event["response"]
            self.done = True
            reason = _finish(response, bool(self._calls))
            finish = Finish(reason, refused=bool(self._refusals))
            usage = decode_usage(response.get("usage"))
            # Without usage the hold-back estimates, as for any stream that sends none.
            out: list[StreamEvent] = [finish] if usage is None else [finish, UsageReport(usage)]
            fields = response_members(response)
            if fields:  # service_tier, the settings the upstream echoes (reasoning, ...)
                out.insert(0, WireEvent("responses", "fields", fields))
            return out
        if kind == "error":
            detail = scrub(str(event.get("message"))[:300], self._secret)
            raise UpstreamReportedError(
                f"Upstream stream error: {detail}",
                upstream_code=reported_code({"code": event.get("code")}),  # type is the event's
            )
        return []
