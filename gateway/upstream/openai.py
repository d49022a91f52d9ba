"""OpenAI-compatible upstream (OpenAI, vLLM, llama.cpp server, ...) over the app's one
``UpstreamHttp``.

Translates canonical requests to the chat-completions wire format and back, for both
``complete`` and ``stream`` (SSE chunks parsed into canonical events, tool-call argument
fragments included; a ``custom`` tool's call is kept whole, ``WireItem``, its fragments
``WireEvent``s). The transport raises the gateway's upstream errors itself; error
statuses become the retry-aware ``UpstreamStatusError``. Model output is bounded: a
non-streaming answer over ``max_upstream_body_bytes`` and one tool call's arguments over
``max_argument_bytes`` are upstream errors, never parsed.

Example::

    upstream = OpenAIUpstream(UpstreamHttp(Connections(env)), env=env)
    response = await upstream.complete(request, model_config)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Citation,
    Finish,
    FinishReason,
    Logprobs,
    Passthrough,
    RefusalDelta,
    Slot,
    StreamEvent,
    TextDelta,
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
from gateway.settings import ModelConfig, Settings
from gateway.upstream import openai_responses
from gateway.upstream.base import TokenCount
from gateway.upstream.engine_tokens import engine_usage
from gateway.upstream.errors import (
    OutputTooLarge,
    UpstreamError,
    UpstreamInvalidResponse,
    UpstreamReportedError,
    reported_code,
    should_retry_header,
    status_error,
)
from gateway.upstream.lines import sse_events
from gateway.upstream.openai_codec import encode_request
from gateway.upstream.redact import scrub
from gateway.upstream.retry import parse_retry_after
from gateway.upstream.same_wire import is_same_wire, same_wire_headers, same_wire_json
from gateway.upstream.tokens import count_openai_tokens, estimated_usage
from gateway.upstream.transport import Target, Targets, UpstreamHttp

__all__ = ["ChunkParser", "OpenAIUpstream", "create", "decode_response", "encode_request"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def _detail(raw: Mapping[str, Any], group: str, key: str) -> int:
    details = raw.get(group)
    if details is None:  # the usual absent group, without the Mapping check
        return 0
    return int(details.get(key) or 0) if isinstance(details, Mapping) else 0


def decode_usage(raw: Any) -> Usage | None:
    """A chat-completions ``usage`` object (``openai.types.CompletionUsage``) -> canonical;
    None when the answer has none. ``prompt_tokens`` already includes the cached ones."""
    if (type(raw) is not dict and not isinstance(raw, Mapping)) or not raw:
        return None
    if raw.keys() <= _USAGE_COUNTS:  # the usual bare counts: no details, nothing kept
        return Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0))
    return Usage(
        int(raw.get("prompt_tokens") or 0),
        int(raw.get("completion_tokens") or 0),
        cache_read_tokens=_detail(raw, "prompt_tokens_details", "cached_tokens"),
        cache_creation_tokens=_detail(raw, "prompt_tokens_details", "cache_write_tokens"),
        reasoning_tokens=_detail(raw, "completion_tokens_details", "reasoning_tokens"),
        kept=None if raw.keys() <= _USAGE_COUNTS else usage_kept("openai", raw, _USAGE_KNOWN),
    )


# The usage members the canonical counts read (a set: those members of a nested object).
_USAGE_KNOWN: Mapping[str, Any] = {
    "prompt_tokens": True,
    "completion_tokens": True,
    "total_tokens": True,
    "prompt_tokens_details": frozenset({"cached_tokens", "cache_write_tokens"}),
    "completion_tokens_details": frozenset({"reasoning_tokens"}),
}
# The members read whole: a usage object of only these keeps nothing (``usage_kept``).
_USAGE_COUNTS = frozenset(k for k, v in _USAGE_KNOWN.items() if v is True)


# What the gateway reads of a message (or a stream's delta); the rest rides along.
_MESSAGE_KNOWN = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
# Top-level members of a stream's chunks a chat-completions client gets back as sent.
_RESPONSE_FIELDS = ("service_tier", "system_fingerprint")


def _tokens(raw: Any) -> tuple[dict[str, Any], ...] | None:
    return tuple(raw) if isinstance(raw, list) and raw else None


def logprobs_of(raw: Any) -> Logprobs | None:
    """A choice's ``logprobs`` object (``content`` and ``refusal`` token lists)."""
    if not isinstance(raw, Mapping):
        return None
    content, refusal = _tokens(raw.get("content")), _tokens(raw.get("refusal"))
    return Logprobs(content, refusal) if content or refusal else None


# What the gateway writes itself of a chat answer; every other top-level member
# (``service_tier``, ``system_fingerprint``, ``moderation``, ...) rides along.
_RESPONSE_OWN = frozenset({"id", "object", "created", "model", "choices", "usage"})


def _passthrough(data: Mapping[str, Any], message: Mapping[str, Any]) -> Passthrough | None:
    # A member-by-member look only where there is a member the gateway does not own.
    top = (
        {}
        if data.keys() <= _RESPONSE_OWN
        else {k: v for k, v in data.items() if k not in _RESPONSE_OWN and v is not None}
    )
    extra = (
        {}
        if message.keys() <= _MESSAGE_KNOWN
        else {k: v for k, v in message.items() if k not in _MESSAGE_KNOWN and v is not None}
    )
    return Passthrough("openai", top, extra) if top or extra else None


def citations_of(raw: Any) -> tuple[Citation, ...]:
    """A message's ``annotations`` (``url_citation``: indexes into its content), for
    another wire's client; a chat client gets them as sent (``Passthrough.message``)."""
    out: list[Citation] = []
    for note in raw if isinstance(raw, list) else ():
        inner = note.get("url_citation") if isinstance(note, dict) else None
        where = inner if isinstance(inner, dict) else {}
        start, end = where.get("start_index"), where.get("end_index")
        start = start if type(start) is int else 0
        out.append(Citation("openai", note, start, end if type(end) is int else start))
    return tuple(out)


def _check_arguments(size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise OutputTooLarge(f"The model's tool-call arguments exceed the {limit} byte limit.")


def _custom(call: Any) -> bool:
    """A ``custom`` tool's call (``input`` text, no ``function``): not the gateway's."""
    return call.get("type") == "custom" or ("custom" in call and "function" not in call)


def _tool_calls(
    raw: Any,
) -> tuple[tuple[ToolCall, ...], tuple[WireItem, ...], tuple[Slot, ...]]:
    """A message's ``tool_calls``: the function calls, the custom tools' calls kept whole,
    and their order when there are custom ones."""
    calls: list[ToolCall] = []
    items: list[WireItem] = []
    layout: list[Slot] = [("text", 0)]  # the message's content comes before its calls
    for i, c in enumerate(raw):
        if _custom(c):
            layout.append(("item", len(items)))
            items.append(WireItem("openai", "custom", dict(c), client_call=True))
            continue
        layout.append(("call", len(calls)))
        fn = c["function"]
        # Positional (id, name, raw_arguments): a class called with keywords builds a dict.
        calls.append(
            ToolCall(
                str(c.get("id") or f"call_{i}"), str(fn["name"]), str(fn.get("arguments") or "")
            )
        )
    # Without items the parts are the content, then the calls: the default order.
    return tuple(calls), tuple(items), answer_layout(layout, items) if items else ()


# What ``_tool_calls`` gives a message without calls.
_NO_CALLS: tuple[tuple[ToolCall, ...], tuple[WireItem, ...], tuple[Slot, ...]] = ((), (), ())


def decode_response(
    data: Any,
    model: ModelConfig,
    *,
    max_argument_bytes: int | None = None,
    request_bytes: int = 0,
) -> ChatResponse:
    """Chat-completions response JSON -> canonical response (first choice). An answer
    without ``usage`` is billed an estimate (``request_bytes``: the body sent)."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        raw_calls = message.get("tool_calls")
        calls, items, layout = _tool_calls(raw_calls) if raw_calls else _NO_CALLS
        for call in calls:
            _check_arguments(len(call.raw_arguments), max_argument_bytes)
        content = message.get("content")
        usage = decode_usage(data.get("usage"))
        refusal = message.get("refusal")
        logprobs = choice.get("logprobs")
        notes = message.get("annotations")
        # Positional, in the field order (a class called with keywords builds a dict): id,
        # model, content, tool_calls, finish_reason, usage, created, stop_sequence, refusal,
        # reasoning, logprobs, passthrough, items, layout, citations.
        response = ChatResponse(
            str(data.get("id") or ""),
            str(data.get("model") or model.upstream_model),
            content if isinstance(content, str) else None,
            calls,
            _FINISH.get(str(choice.get("finish_reason")), "stop"),
            usage or Usage(),
            int(data.get("created") or time.time()),
            None,
            refusal if isinstance(refusal, str) else None,
            (),
            None if logprobs is None else logprobs_of(logprobs),
            _passthrough(data, message),
            items,
            layout,
            citations_of(notes) if notes else (),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise UpstreamInvalidResponse(
            f"Upstream returned an unexpected response shape ({type(exc).__name__})."
        ) from exc
    if usage is None:
        return dataclasses.replace(response, usage=estimated_usage(request_bytes, response))
    return response


def _encode(request: ChatRequest, model: ModelConfig, *, stream: bool) -> bytes:
    """The client's own body for a client on this wire (``same_wire``), else the codec's."""
    if is_same_wire(request, model):
        return same_wire_json(request, model, stream=stream)
    if model.api == "responses":
        return orjson.dumps(openai_responses.encode_request(request, model, stream=stream))
    return orjson.dumps(encode_request(request, model, stream=stream))


def _client_messages(request: ChatRequest, model: ModelConfig) -> int:
    """How many of the body's messages are the client's own, at the client's indexes: a
    same-wire body's first ones (a correction's turns come after them); none of a body the
    codec built for a client on another wire (its indexes are the gateway's)."""
    origin = request.origin
    if origin is None:
        return len(request.messages)
    return origin.messages if is_same_wire(request, model) else 0


def _error_from_status(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    secret: str | None = None,
    client_messages: int | None = None,
) -> UpstreamError:
    return status_error(
        status,
        body,
        secret=secret,
        wire="openai",
        retry_after_s=parse_retry_after(headers.get("retry-after")),
        client_messages=client_messages,
        should_retry=should_retry_header(headers.get("x-should-retry")),
    )


def _answer_text(response: ChatResponse) -> str:
    return (response.content or "") + "".join(c.name + c.raw_arguments for c in response.tool_calls)


class OpenAIUpstream:
    """The ``Upstream`` adapter for OpenAI-compatible servers."""

    def __init__(
        self,
        http: UpstreamHttp,
        env: Mapping[str, str],
        *,
        max_argument_bytes: int | None = None,
        max_body_bytes: int | None = None,
    ) -> None:
        self.http = http
        self.env = env
        self.max_argument_bytes = max_argument_bytes
        self.max_body_bytes = max_body_bytes
        self._targets = Targets(self._build_target)

    def _build_target(self, model: ModelConfig, _stream: bool) -> Target:
        path = "/responses" if model.api == "responses" else "/chat/completions"
        headers = {"content-type": "application/json"}
        key = model.api_key(self.env)
        if key:
            headers["authorization"] = f"Bearer {key}"
        return Target.build(
            model.base_url.rstrip("/") + path, headers, self.http.connections.route(model)
        )

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        responses = model.api == "responses"
        body = await self.http.encode(request.body_bytes, _encode, request, model, stream=False)
        target = self._targets.get(model)
        reply = await self.http.post(
            target.url,
            body,
            target.headers_with(same_wire_headers(request, model)),
            target.route,
            timeout_s=model.timeout_s,
            limit=self.max_body_bytes,
        )
        if reply.status_code >= 400:
            raise _error_from_status(
                reply.status_code,
                reply.body,
                reply.headers,
                model.api_key(self.env),
                _client_messages(request, model),
            )
        try:
            data = orjson.loads(reply.body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamInvalidResponse("Upstream returned invalid JSON.") from exc
        decode = openai_responses.decode_response if responses else decode_response
        response = decode(
            data, model, max_argument_bytes=self.max_argument_bytes, request_bytes=len(body)
        )
        if response.usage.estimated and model.profile.tokenize is not None:
            counted = await engine_usage(
                self.http, model, target.headers, request, _answer_text(response)
            )
            if counted is not None:
                response = dataclasses.replace(response, usage=counted)
        return response

    async def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        responses = model.api == "responses"
        body = await self.http.encode(request.body_bytes, _encode, request, model, stream=True)
        target = self._targets.get(model)
        async with self.http.stream(
            target.url,
            body,
            target.headers_with(same_wire_headers(request, model)),
            target.route,
            timeout_s=model.timeout_s,
        ) as resp:
            if resp.status_code >= 400:
                raise _error_from_status(
                    resp.status_code,
                    await resp.read_error(),
                    resp.headers,
                    model.api_key(self.env),
                    _client_messages(request, model),
                )
            secret = model.api_key(self.env)
            limit = self.max_argument_bytes
            parser: ChunkParser | openai_responses.EventParser = (
                openai_responses.EventParser(max_argument_bytes=limit, secret=secret)
                if responses
                else ChunkParser(max_argument_bytes=limit, secret=secret)
            )
            # What came back, for an engine that reports no usage in streams.
            counting = model.profile.tokenize is not None
            answer: list[str] = []
            reported = False
            async for _name, data in sse_events(resp.lines()):
                for event in parser.feed_data(data):
                    if counting:
                        reported = reported or isinstance(event, UsageReport)
                        _collect(event, answer)
                    yield event
                if parser.done:
                    break
            if not parser.done and not (isinstance(parser, ChunkParser) and parser.finished):
                raise UpstreamError("Upstream stream ended before it finished.")
        if counting and not reported:
            # Counted after the stream's connection is back in the pool.
            counted = await engine_usage(self.http, model, target.headers, request, "".join(answer))
            if counted is not None:
                yield UsageReport(counted)

    async def count_tokens(
        self, request: ChatRequest, body: Mapping[str, Any], model: ModelConfig
    ) -> TokenCount:
        """OpenAI has no counting endpoint: the model's encoding, an estimate
        (``gateway.upstream.tokens``)."""
        return TokenCount(await count_openai_tokens(request, model.upstream_model), "estimate")

    async def aclose(self) -> None:
        # The HTTP client belongs to the app (shared by every adapter); it closes it.
        return None


def _collect(event: StreamEvent, answer: list[str]) -> None:
    if isinstance(event, TextDelta):
        answer.append(event.text)
    elif isinstance(event, ToolCallStart):
        answer.append(event.name)
    elif isinstance(event, ToolCallDelta):
        answer.append(event.arguments)


class ChunkParser:
    """Parses chat-completion SSE lines into canonical events (first choice only)."""

    __slots__ = (
        "arg_bytes",
        "custom",
        "done",
        "fields",
        "finished",
        "max_argument_bytes",
        "refused",
        "secret",
        "started",
    )

    def __init__(self, *, max_argument_bytes: int | None = None, secret: str | None = None) -> None:
        self.secret = secret
        self.done = False  # saw data: [DONE]
        self.finished = False  # saw a finish_reason
        self.refused = False  # saw delta.refusal
        self.fields: tuple[Any, ...] = (None, None)  # the last service_tier, fingerprint
        self.started: set[int] = set()
        self.custom: set[int] = set()  # indexes of custom tools' calls
        self.max_argument_bytes = max_argument_bytes
        self.arg_bytes: dict[int, int] = {}

    def feed_data(self, data: str) -> list[StreamEvent]:
        """One SSE event's data: a chunk, or ``[DONE]``."""
        payload = data.strip()
        if payload == "[DONE]":
            self.done = True
            return []
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise UpstreamInvalidResponse("Upstream sent an invalid stream chunk.") from exc
        if isinstance(chunk, Mapping) and "error" in chunk:
            detail = scrub(str(chunk["error"])[:300], self.secret)
            raise UpstreamReportedError(
                f"Upstream stream error: {detail}", upstream_code=reported_code(chunk["error"])
            )
        try:
            return self.feed_chunk(chunk)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            # valid JSON in the wrong shape (a list, a string delta, index "x", ...)
            raise UpstreamInvalidResponse(
                f"Upstream sent a malformed stream chunk ({type(exc).__name__})."
            ) from exc

    def feed_chunk(self, chunk: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        fields = (chunk.get("service_tier"), chunk.get("system_fingerprint"))
        if fields != self.fields:
            self.fields = fields
            top = {k: v for k, v in zip(_RESPONSE_FIELDS, fields, strict=True) if v is not None}
            events.append(WireEvent("openai", "fields", top))
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            logprobs = choice.get("logprobs")
            text = delta.get("content")
            if text:
                tokens = _tokens(logprobs.get("content")) if logprobs else None
                events.append(TextDelta(text, tokens))
            refusal = delta.get("refusal")
            if refusal:
                self.refused = True
                tokens = _tokens(logprobs.get("refusal")) if logprobs else None
                events.append(RefusalDelta(str(refusal), tokens))
            if delta and not _MESSAGE_KNOWN.issuperset(delta):
                extra = {
                    k: v for k, v in delta.items() if k not in _MESSAGE_KNOWN and v is not None
                }
                if extra:  # reasoning_content, audio, annotations: chat clients only
                    events.append(
                        WireEvent(
                            "openai",
                            "delta",
                            extra,
                            citations=citations_of(extra.get("annotations")),
                        )
                    )
            for frag in delta.get("tool_calls") or ():
                index = int(frag.get("index", 0))
                if index in self.custom or _custom(frag):
                    # A custom tool's call: a chat client gets its fragments as sent.
                    opened = index not in self.custom
                    self.custom.add(index)
                    events.append(
                        WireEvent("openai", "delta", {"tool_calls": [frag]}, client_call=opened)
                    )
                    continue
                fn = frag.get("function") or {}
                if index not in self.started:
                    self.started.add(index)
                    call_id = frag.get("id") or f"call_{index}"
                    events.append(ToolCallStart(index, str(call_id), str(fn.get("name") or "")))
                args = fn.get("arguments")
                if args:
                    if not isinstance(args, str):
                        raise TypeError("arguments fragment is not a string")
                    self.arg_bytes[index] = self.arg_bytes.get(index, 0) + len(args)
                    _check_arguments(self.arg_bytes[index], self.max_argument_bytes)
                    events.append(ToolCallDelta(index, args))
            reason = choice.get("finish_reason")
            if reason:
                self.finished = True
                events.append(Finish(_FINISH.get(reason, "stop"), refused=self.refused))
        usage = decode_usage(chunk.get("usage"))
        if usage is not None:
            events.append(UsageReport(usage))
        return events


def create(http: UpstreamHttp, settings: Settings) -> OpenAIUpstream:
    """Registry factory (see ``gateway.upstream.registry``)."""
    return OpenAIUpstream(
        http,
        settings.env,
        max_argument_bytes=settings.max_argument_bytes,
        max_body_bytes=settings.max_upstream_body_bytes,
    )
