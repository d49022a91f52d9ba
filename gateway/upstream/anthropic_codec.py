"""Wire codec for the Anthropic upstream adapter: canonical request -> Messages JSON, and
Messages SSE -> canonical stream events. No I/O here (see ``anthropic.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

import validator
from gateway.canonical import (
    ChatRequest,
    Citation,
    ContentPart,
    Finish,
    FinishReason,
    ForcedTool,
    JsonSchemaFormat,
    Members,
    Message,
    Passthrough,
    Reasoning,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
    WireEvent,
    usage_kept,
)
from gateway.errors import UpstreamError
from gateway.settings import ModelConfig
from gateway.upstream.carried import carry_over
from gateway.upstream.errors import UpstreamInvalidResponse, UpstreamReportedError, reported_code
from gateway.upstream.redact import scrub

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "KEPT_MEMBERS",
    "THINKING_BLOCKS",
    "StreamDecoder",
    "answer_fields",
    "call_members",
    "encode_messages",
    "encode_request",
    "finish_reason",
    "usage_of",
]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "stop",  # the answer is the refusal (``ChatResponse.refusal``)
}


# Content blocks of the model's reasoning, passed through whole (signature, data).
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


# Stop reasons the canonical finish reason does not tell apart, kept for a Messages client:
# a paused server-tool turn the client continues, a full context window.
_KEPT_STOPS = frozenset({"pause_turn", "model_context_window_exceeded"})


# Members of a message kept for a Messages client: the code-execution ``container`` the
# answer ran in, a refusal's ``stop_details``, prompt-cache ``diagnostics``.
KEPT_MEMBERS = ("container", "stop_details", "diagnostics")


def answer_fields(stop_reason: object, members: Mapping[str, Any]) -> Passthrough | None:
    """What a Messages client gets back as sent: a ``stop_reason`` the canonical finish
    loses, and the message's ``KEPT_MEMBERS`` (from ``members``: the message, or a
    stream's ``message_delta.delta`` so far)."""
    fields: dict[str, Any] = {}
    if stop_reason in _KEPT_STOPS:
        fields["stop_reason"] = stop_reason
    for key in KEPT_MEMBERS:
        if members.get(key) is not None:
            fields[key] = members[key]
    return Passthrough("anthropic", fields) if fields else None


# What the gateway reads of a ``tool_use`` block; the rest (``caller``, ``toolset_name``)
# rides along for a Messages client.
_CALL_KNOWN = frozenset({"type", "id", "name", "input"})


def call_members(block: Mapping[str, Any]) -> Members | None:
    """A ``tool_use`` block's members the gateway does not interpret, kept as sent."""
    extra = {k: v for k, v in block.items() if k not in _CALL_KNOWN}
    return Members("anthropic", extra) if extra else None


def finish_reason(stop_reason: object) -> FinishReason:
    """Canonical finish reason for an Anthropic ``stop_reason`` (unknown -> ``stop``)."""
    return _FINISH.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def usage_of(raw: object) -> Usage | None:
    """A Messages ``usage`` object (``anthropic.types.Usage``) -> canonical; None when the
    answer has none. Its ``input_tokens`` are the uncached ones only: the canonical prompt
    adds the tokens written to and read from the cache."""
    if not isinstance(raw, dict) or not raw:
        return None
    uncached = int(raw.get("input_tokens") or 0)
    written = int(raw.get("cache_creation_input_tokens") or 0)
    read = int(raw.get("cache_read_input_tokens") or 0)
    details = raw.get("output_tokens_details")
    thinking = int(details.get("thinking_tokens") or 0) if isinstance(details, dict) else 0
    return Usage(
        prompt_tokens=uncached + written + read,
        completion_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=read,
        cache_creation_tokens=written,
        reasoning_tokens=thinking,
        kept=usage_kept("anthropic", raw, _USAGE_KNOWN),
    )


# The usage members the canonical counts read (a set: those members of a nested object);
# the rest (``server_tool_use``, ``cache_creation``, ``service_tier``, ...) is kept.
_USAGE_KNOWN: Mapping[str, Any] = {
    "input_tokens": True,
    "output_tokens": True,
    "cache_creation_input_tokens": True,
    "cache_read_input_tokens": True,
    "output_tokens_details": frozenset({"thinking_tokens"}),
}


# Anthropic requires max_tokens; chat-completions clients may omit it.
DEFAULT_MAX_TOKENS = 4096


def _part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if part.data is not None:
        source = {"type": "base64", "media_type": part.media_type or "image/png", "data": part.data}
    elif part.url is not None and part.url.startswith("data:"):
        header, _, data = part.url.partition(",")
        media_type = header[5:].split(";", 1)[0] or "image/png"
        source = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": part.url or ""}
    return {"type": "image", "source": source}


def _tool_use(call: ToolCall) -> dict[str, Any]:
    try:
        value = orjson.loads(call.raw_arguments)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        # A bad call replayed in a correction turn may not be a JSON object, which this
        # wire format cannot carry as ``input``; keep the model's exact text visible.
        value = {"_raw_arguments": call.raw_arguments}
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": value}


def _tool_result(msg: Message) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": msg.tool_call_id or "",
        "content": [_part(p) for p in msg.content if not isinstance(p, TextPart) or p.text] or "",
    }
    if msg.is_error:
        block["is_error"] = True
    return block


def _messages(messages: tuple[Message, ...]) -> tuple[str | None, list[dict[str, Any]]]:
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return  # the Messages API refuses empty turns
        # It also wants alternating turns: merge consecutive same-role blocks (e.g. several
        # tool results, or tool results followed by user text).
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for msg in messages:
        # Empty text blocks are refused by the Messages API; chat clients do send "".
        parts = [_part(p) for p in msg.content if not (isinstance(p, TextPart) and not p.text)]
        if msg.role == "system":
            system.append(msg.text)
        elif msg.role == "user":
            add("user", parts)
        elif msg.role == "tool":
            add("user", [_tool_result(msg)])
        else:
            # Thinking first, as sent (Anthropic checks the signature); another
            # provider's reasoning has no place here.
            thinking = [dict(r.raw) for r in msg.reasoning if r.wire == "anthropic"]
            add("assistant", thinking + parts + [_tool_use(c) for c in msg.tool_calls])
    return ("\n\n".join(system) if system else None), out


def encode_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Canonical turns (no system messages) -> Messages ``messages`` entries."""
    return _messages(messages)[1]


def encode_request(request: ChatRequest, model: ModelConfig, *, stream: bool) -> dict[str, Any]:
    """The Messages API body for a canonical request. ``strict`` is sent only to a
    ``constrained`` model; otherwise the gateway enforces it. What Anthropic constrains
    (strict tools, ``output_config``) gets the schema its strict mode accepts
    (``validator.anthropic_copy``, as anthropic-python's ``transform_schema`` makes it);
    the answer is still checked against the
    client's."""
    system, messages = _messages(request.messages)
    body: dict[str, Any] = {
        "model": model.upstream_model,
        "messages": messages,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
    }
    if system is not None:
        body["system"] = system
    if request.tools:
        tools = []
        for tool in request.tools:
            constrained = tool.strict and model.constrained
            schema = validator.anthropic_copy(tool.parameters) if constrained else tool.parameters
            wire: dict[str, Any] = {"name": tool.name, "input_schema": schema}
            if tool.description is not None:
                wire["description"] = tool.description
            if constrained:
                wire["strict"] = True
            tools.append(wire)
        body["tools"] = tools
    choice = request.tool_choice
    wire_choice: dict[str, Any] | None = None
    if isinstance(choice, ForcedTool):
        wire_choice = {"type": "tool", "name": choice.name}
    elif choice is not None:
        wire_choice = {"type": {"required": "any"}.get(choice, choice)}
    if request.parallel_tool_calls is False and request.tools:
        wire_choice = (wire_choice or {"type": "auto"}) | {"disable_parallel_tool_use": True}
    if wire_choice is not None and request.tools:
        body["tool_choice"] = wire_choice
    if isinstance(request.response_format, JsonSchemaFormat):
        body["output_config"] = {
            "format": {
                "type": "json_schema",
                "schema": validator.anthropic_copy(request.response_format.schema),
            }
        }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.user is not None:
        body["metadata"] = {"user_id": request.user}
    carry_over(body, request, "messages")
    if stream:
        body["stream"] = True
    return body


class StreamDecoder:
    """Messages SSE events -> canonical events. Tool calls are numbered by their order
    among tool_use blocks (the canonical ``index``). Blocks other than text and tool_use
    (thinking, server tools' use and results) pass through as ``WireEvent``s. An in-band
    ``error`` event becomes an ``UpstreamError`` whose text is scrubbed (``secret``: the
    upstream key, and anything shaped like a credential), since it reaches the client, the
    logs and the ledger."""

    __slots__ = (
        "_blocks",
        "_chars",
        "_cited",
        "_done",
        "_got_input",
        "_kept",
        "_passing",
        "_reason",
        "_secret",
        "_stop_seq",
        "_thinking",
        "_tools",
        "_usage",
    )

    def __init__(self, secret: str | None = None) -> None:
        self._secret = secret
        self._blocks: dict[int, int | None] = {}  # block index -> tool ordinal (None: text)
        self._got_input: set[int] = set()
        self._passing: set[int] = set()  # indexes of the blocks passed through
        # block index -> the thinking block so far, and its thinking text in pieces
        self._thinking: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self._tools = 0
        self._reason: Any = None
        self._stop_seq: str | None = None
        self._kept: dict[str, Any] = {}  # the message's KEPT_MEMBERS so far
        # text block index -> where it starts in the answer's text and its citations
        self._cited: dict[int, tuple[int, list[dict[str, Any]]]] = {}
        self._chars = 0  # characters of text so far
        # The usage fields as last reported: message_start's, overridden field by field by
        # message_delta's (cumulative figures; a field it leaves out keeps its value).
        self._usage: dict[str, Any] = {}
        self._done = False

    def feed(self, name: str, data: str) -> list[StreamEvent]:
        if name == "ping":
            return []
        try:
            event: Any = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamInvalidResponse(
                "The upstream stream carried an event that is not JSON."
            ) from exc
        kind = event.get("type", name) if isinstance(event, dict) else name
        if kind == "error":
            err = event.get("error") if isinstance(event, dict) else None
            message = err.get("message") if isinstance(err, dict) else None
            detail = scrub(str(message)[:500], self._secret) if message else "error event"
            raise UpstreamReportedError(
                f"The upstream stream failed: {detail}", upstream_code=reported_code(err)
            )
        handler = getattr(self, "_on_" + str(kind), None)
        if handler is None:
            return []
        try:
            return handler(event)  # type: ignore[no-any-return]
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            # valid JSON in the wrong shape (a list, "index": "x", a string delta, ...)
            raise UpstreamInvalidResponse(
                f"The upstream stream carried a malformed {kind!s:.40} event "
                f"({type(exc).__name__})."
            ) from exc

    def _on_message_start(self, event: dict[str, Any]) -> list[StreamEvent]:
        message = event.get("message", {})
        raw = message.get("usage")
        if isinstance(raw, dict):
            self._usage = dict(raw)
        self._kept.update((k, message[k]) for k in KEPT_MEMBERS if message.get(k) is not None)
        return []

    def _on_content_block_start(self, event: dict[str, Any]) -> list[StreamEvent]:
        block = event.get("content_block") or {}
        index = int(event.get("index", 0))
        kind = block.get("type")
        if isinstance(kind, str) and kind not in ("text", "tool_use"):
            self._passing.add(index)
            if kind in THINKING_BLOCKS:
                self._thinking[index] = (dict(block), [str(block.get("thinking") or "")])
            return [WireEvent("anthropic", "event", event)]
        if kind == "tool_use":
            ordinal = self._tools
            self._tools += 1
            self._blocks[index] = ordinal
            out: list[StreamEvent] = [
                ToolCallStart(
                    ordinal,
                    str(block.get("id", "")),
                    str(block.get("name", "")),
                    members=call_members(block),
                )
            ]
            if block.get("input"):
                self._got_input.add(ordinal)
                out.append(ToolCallDelta(ordinal, orjson.dumps(block["input"]).decode()))
            return out
        self._blocks[index] = None
        text = block.get("text") if kind == "text" else None
        out = []
        if kind == "text" and isinstance(block.get("citations"), list):
            # A block that cites: a Messages client gets it as its own block, citations
            # first (``citations_delta``), as sent.
            cited = [c for c in block["citations"] if isinstance(c, dict)]
            self._cited[index] = (self._chars, list(cited))
            out.append(WireEvent("anthropic", "cited_block", {"citations": cited}))
        if text:
            out.append(self._text(str(text)))
        return out

    def _text(self, text: str) -> TextDelta:
        self._chars += len(text)
        return TextDelta(text)

    def _on_content_block_delta(self, event: dict[str, Any]) -> list[StreamEvent]:
        delta = event.get("delta") or {}
        index = int(event.get("index", 0))
        if index in self._passing:
            thought = self._thinking.get(index)
            if thought is not None:  # thinking_delta, signature_delta
                if delta.get("type") == "thinking_delta":
                    thought[1].append(str(delta["thinking"]))
                elif delta.get("type") == "signature_delta":
                    thought[0]["signature"] = str(delta["signature"])
            return [WireEvent("anthropic", "event", event)]
        ordinal = self._blocks.get(index)
        if delta.get("type") == "text_delta" and delta.get("text"):
            return [self._text(str(delta["text"]))]
        if delta.get("type") == "citations_delta" and ordinal is None:
            citation = delta["citation"]
            out: list[StreamEvent] = []
            if index not in self._cited:  # a citation in a block that started without any
                self._cited[index] = (self._chars, [])
                out.append(WireEvent("anthropic", "cited_block", {"citations": []}))
            if isinstance(citation, dict):
                self._cited[index][1].append(citation)
            out.append(WireEvent("anthropic", "citation", {"citation": citation}))
            return out
        if delta.get("type") == "input_json_delta" and ordinal is not None:
            fragment = str(delta.get("partial_json", ""))
            if not fragment:
                return []
            self._got_input.add(ordinal)
            return [ToolCallDelta(ordinal, fragment)]
        return []

    def _on_content_block_stop(self, event: dict[str, Any]) -> list[StreamEvent]:
        index = int(event.get("index", 0))
        if index in self._passing:
            self._passing.discard(index)
            thought = self._thinking.pop(index, None)
            done = None
            if thought is not None:
                block, pieces = thought
                if block.get("type") == "thinking":
                    block["thinking"] = "".join(pieces)
                done = Reasoning("anthropic", block, str(block.get("thinking") or ""))
            return [WireEvent("anthropic", "event", event, done)]
        if index in self._cited:
            start, cited = self._cited.pop(index)
            spans = tuple(Citation("anthropic", c, start, self._chars) for c in cited)
            return [WireEvent("anthropic", "cited_block_stop", {}, citations=spans)]
        ordinal = self._blocks.get(index)
        if ordinal is not None and ordinal not in self._got_input:
            # A tool with no arguments streams no input_json_delta; its input is {}.
            self._got_input.add(ordinal)
            return [ToolCallDelta(ordinal, "{}")]
        return []

    def _on_message_delta(self, event: dict[str, Any]) -> list[StreamEvent]:
        delta = event.get("delta") or {}
        self._reason = delta.get("stop_reason", self._reason)
        if isinstance(delta.get("stop_sequence"), str):
            self._stop_seq = delta["stop_sequence"]
        self._kept.update((k, delta[k]) for k in KEPT_MEMBERS if delta.get(k) is not None)
        raw = event.get("usage") or {}
        self._usage.update((k, v) for k, v in raw.items() if v is not None)
        return []

    def _on_message_stop(self, event: dict[str, Any]) -> list[StreamEvent]:
        self._done = True
        finish = Finish(
            finish_reason(self._reason), self._stop_seq, refused=self._reason == "refusal"
        )
        usage = usage_of(self._usage)
        # Without usage the hold-back estimates, as for any stream that sends none.
        out: list[StreamEvent] = [finish] if usage is None else [finish, UsageReport(usage)]
        kept = answer_fields(self._reason, self._kept)
        if kept is not None:
            out.insert(0, WireEvent("anthropic", "fields", kept.response))
        return out

    def end(self) -> list[StreamEvent]:
        """Call when the byte stream ends: a stream cut before ``message_stop`` fails."""
        if not self._done:
            raise UpstreamError("The upstream stream ended before message_stop.")
        return []
