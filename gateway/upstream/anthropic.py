"""Upstream adapter for providers speaking the Anthropic Messages API (``provider =
"anthropic"``).

Canonical request -> ``POST {base_url}/messages`` (``x-api-key``, ``anthropic-version``);
the response and its SSE stream -> canonical. ``tool_use.input`` objects become
``raw_arguments`` JSON text; ``input_json_delta`` fragments become ``ToolCallDelta``;
thinking blocks (``Reasoning``) and server tools' blocks (``WireItem``) are kept whole, in
their place.
The transport (``UpstreamHttp``) raises the gateway's upstream errors itself; error statuses
become the retry-aware ``UpstreamStatusError`` here.

Example::

    upstream = AnthropicUpstream(UpstreamHttp(Connections(env)), env=env)
    response = await upstream.complete(request, model_config)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import orjson

import validator
from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Citation,
    Reasoning,
    Slot,
    StreamEvent,
    ToolCall,
    Usage,
    WireItem,
    answer_layout,
)
from gateway.settings import ModelConfig, Settings
from gateway.upstream.anthropic_codec import (
    THINKING_BLOCKS,
    StreamDecoder,
    answer_fields,
    call_members,
    encode_request,
    finish_reason,
    usage_of,
)
from gateway.upstream.base import TokenCount
from gateway.upstream.errors import (
    UpstreamInvalidResponse,
    UpstreamStatusError,
    should_retry_header,
    status_error,
)
from gateway.upstream.lines import sse_events
from gateway.upstream.retry import parse_retry_after
from gateway.upstream.same_wire import is_same_wire, same_wire_headers, same_wire_json
from gateway.upstream.tokens import estimated_usage
from gateway.upstream.transport import Target, Targets, UpstreamHttp

__all__ = ["ANTHROPIC_VERSION", "AnthropicUpstream", "create", "decode_response"]

ANTHROPIC_VERSION = "2023-06-01"


class _Members(list[tuple[str, Any]]):
    """A JSON object as its members in order, duplicates kept."""


def _text_of(node: Any) -> str:
    """JSON text of a value parsed with ``_Members`` objects: a duplicate key stays in."""
    if isinstance(node, _Members):
        return "{" + ",".join(f"{json.dumps(k)}:{_text_of(v)}" for k, v in node) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_text_of(v) for v in node) + "]"
    return json.dumps(node)


def _inputs_as_sent(raw: bytes) -> list[str]:
    """Each ``tool_use`` block's ``input`` as the upstream wrote it, duplicate keys kept."""
    tree = json.loads(raw, object_pairs_hook=_Members)
    content: Any = next((v for k, v in tree if k == "content"), None)
    out = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, _Members) and ("type", "tool_use") in block:
            out.append(_text_of(next((v for k, v in block if k == "input"), _Members())))
    return out


def decode_response(
    body: object, model: ModelConfig, raw: bytes | None = None, *, request_bytes: int = 0
) -> ChatResponse:
    """An Anthropic ``message`` object -> canonical ``ChatResponse``. With ``raw`` (the
    body's text) holding a duplicate key, each tool input is taken as written: a parsed
    object keeps only one of the duplicates, which would hide them from validation. An
    answer without ``usage`` is billed an estimate (``request_bytes``: the body sent)."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        raise UpstreamInvalidResponse("The upstream returned a malformed message.")
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    items: list[WireItem] = []
    layout: list[Slot] = []
    citations: list[Citation] = []
    size = 0  # characters of text so far
    as_sent = None
    if raw is not None and validator.duplicate_key(raw, body) is not None:
        inputs = _inputs_as_sent(raw)
        uses = [b for b in body["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        if len(inputs) != len(uses):  # the duplicate is in the message's own structure
            raise UpstreamInvalidResponse("The upstream's message names a key twice.")
        as_sent = iter(inputs)
    for block in body["content"]:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
            start, size = size, size + len(texts[-1])
            layout.append(("text", size))
            cited = block.get("citations")
            if isinstance(cited, list):  # a cited block covers its whole text
                citations.extend(
                    Citation("anthropic", c, start, size) for c in cited if isinstance(c, dict)
                )
        elif kind in THINKING_BLOCKS:
            # Kept whole: the signature is what lets the client send it back.
            layout.append(("reasoning", len(reasoning)))
            reasoning.append(Reasoning("anthropic", block, str(block.get("thinking") or "")))
        elif kind == "tool_use":
            layout.append(("call", len(calls)))
            calls.append(
                ToolCall(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    raw_arguments=(
                        next(as_sent)
                        if as_sent is not None
                        else orjson.dumps(block.get("input", {})).decode()
                    ),
                    members=call_members(block),
                )
            )
        elif isinstance(kind, str):
            # Server tools' use and results, uploads: a Messages client gets them as sent.
            layout.append(("item", len(items)))
            items.append(WireItem("anthropic", kind, block))
    usage = usage_of(body.get("usage"))
    # A refusal's text (possibly none) is what the model said instead of an answer.
    refused = body.get("stop_reason") == "refusal"
    text = "".join(texts) if texts else None
    response = ChatResponse(
        id=str(body.get("id", "")),
        model=str(body.get("model", model.upstream_model)),
        content=None if refused else text,
        tool_calls=tuple(calls),
        finish_reason=finish_reason(body.get("stop_reason")),
        usage=usage or Usage(),
        stop_sequence=stop if isinstance(stop := body.get("stop_sequence"), str) else None,
        refusal=(text or "") if refused else None,
        reasoning=tuple(reasoning),
        passthrough=answer_fields(body.get("stop_reason"), body),
        items=tuple(items),
        layout=answer_layout(layout, items),
        citations=tuple(citations),
    )
    if usage is None:
        return dataclasses.replace(response, usage=estimated_usage(request_bytes, response))
    return response


def _encode(request: ChatRequest, model: ModelConfig, *, stream: bool) -> bytes:
    """The client's own body for a Messages client (``same_wire``), else the codec's."""
    if is_same_wire(request, model):
        return same_wire_json(request, model, stream=stream)
    return orjson.dumps(encode_request(request, model, stream=stream))


def _count_body(body: Mapping[str, Any], model: str) -> bytes:
    """A count_tokens body: the client's, with the upstream's model name."""
    return orjson.dumps({**body, "model": model})


class _Answer(Protocol):
    """What an error message needs of an answer: ``Reply`` or ``StreamAnswer``."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


COUNT_BODY_BYTES = 64 * 1024  # {"input_tokens": N} is a few bytes


def _status_error(response: _Answer, body: bytes, secret: str | None = None) -> UpstreamStatusError:
    # status-aware: a 4xx keeps its status, 429/529/502/503 are retried (upstream.retry)
    return status_error(
        response.status_code,
        body,
        secret=secret,
        wire="anthropic",
        retry_after_s=parse_retry_after(response.headers.get("retry-after")),
        should_retry=should_retry_header(response.headers.get("x-should-retry")),
    )


class AnthropicUpstream:
    """The Upstream Protocol over an Anthropic-compatible ``/v1/messages`` endpoint.

    ``http`` is the app's one ``UpstreamHttp`` (the adapter never closes it); ``env`` is
    where ``api_key_env`` is looked up.
    """

    def __init__(
        self,
        http: UpstreamHttp,
        env: Mapping[str, str],
        *,
        max_body_bytes: int | None = None,
        anthropic_version: str = ANTHROPIC_VERSION,
    ) -> None:
        self.http = http
        self._env = env
        self.max_body_bytes = max_body_bytes
        self._version = anthropic_version
        self._targets = Targets(self._build_target)

    def _build_target(self, model: ModelConfig, stream: bool) -> Target:
        base = model.base_url.rstrip("/")
        url = f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"
        headers = {"anthropic-version": self._version, "content-type": "application/json"}
        key = model.api_key(self._env)
        if key:
            headers["x-api-key"] = key
        if stream:
            headers["accept"] = "text/event-stream"
        return Target.build(url, headers, self.http.connections.route(model))

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        payload = await self.http.encode(request.body_bytes, _encode, request, model, stream=False)
        target = self._targets.get(model)
        reply = await self.http.post(
            target.url,
            payload,
            target.headers_with(same_wire_headers(request, model)),
            target.route,
            timeout_s=model.timeout_s,
            limit=self.max_body_bytes,
        )
        if reply.status_code >= 400:
            raise _status_error(reply, reply.body, model.api_key(self._env))
        try:
            body: Any = orjson.loads(reply.body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamInvalidResponse("The upstream returned a body that is not JSON.") from exc
        return decode_response(body, model, reply.body, request_bytes=len(payload))

    async def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        payload = await self.http.encode(request.body_bytes, _encode, request, model, stream=True)
        target = self._targets.get(model, stream=True)
        async with self.http.stream(
            target.url,
            payload,
            target.headers_with(same_wire_headers(request, model)),
            target.route,
            timeout_s=model.timeout_s,
        ) as response:
            if response.status_code >= 400:
                body = await response.read_error()
                raise _status_error(response, body, model.api_key(self._env))
            decoder = StreamDecoder(model.api_key(self._env))
            async for name, data in sse_events(response.lines()):
                for event in decoder.feed(name, data):
                    yield event
            for event in decoder.end():
                yield event

    async def count_tokens(
        self, request: ChatRequest, body: Mapping[str, Any], model: ModelConfig
    ) -> TokenCount:
        """The provider's own count: the client's body (with the upstream's model name) to
        its ``/v1/messages/count_tokens``, with the same headers as a message."""
        target = self._targets.get(model)
        url = str(target.url) + "/count_tokens"
        reply = await self.http.post(
            url,
            await self.http.encode(request.body_bytes, _count_body, body, model.upstream_model),
            target.headers_with(same_wire_headers(request, model)),
            target.route,
            timeout_s=model.timeout_s,
            limit=COUNT_BODY_BYTES,
        )
        if reply.status_code >= 400:
            raise _status_error(reply, reply.body, model.api_key(self._env))
        try:
            answer: Any = orjson.loads(reply.body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamInvalidResponse("The upstream returned a body that is not JSON.") from exc
        tokens = answer.get("input_tokens") if isinstance(answer, dict) else None
        if type(tokens) is not int or tokens < 0:
            raise UpstreamInvalidResponse("The upstream's token count has no input_tokens.")
        return TokenCount(tokens, "upstream")

    async def aclose(self) -> None:
        # The HTTP client belongs to the app (shared by every adapter); it closes it.
        return None


def create(http: UpstreamHttp, settings: Settings) -> AnthropicUpstream:
    """Registry factory (see ``gateway.upstream.registry``)."""
    return AnthropicUpstream(http, settings.env, max_body_bytes=settings.max_upstream_body_bytes)
