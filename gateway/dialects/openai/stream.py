"""Canonical stream events -> OpenAI ``chat.completion.chunk`` Server-Sent Events.

The wire format, as the OpenAI API sends it and the ``openai`` SDK parses it::

    data: {"id":"chatcmpl-..","object":"chat.completion.chunk","created":1733000000,
           "model":"amara-s1.2","system_fingerprint":null,
           "choices":[{"index":0,"delta":{"role":"assistant","content":""},
                       "logprobs":null,"finish_reason":null}]}
    data: {..."delta":{"content":"Hi"}...}
    data: {..."delta":{"refusal":"I can't"}...}            (a refusal, instead of content)
    data: {..."delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",
                       "function":{"name":"create_refund","arguments":""}}]}...}
    data: {..."delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a"}}]}...}
    data: {..."delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}
    data: {..."choices":[],"usage":{"prompt_tokens":..,"completion_tokens":..,
           "total_tokens":..,"prompt_tokens_details":{"cached_tokens":..},
           "completion_tokens_details":{"reasoning_tokens":..},
           "schema_retries":1}}                             (stream_options.include_usage)
    data: [DONE]

An error after the first byte is one in-band event with the unified envelope and NO
``[DONE]`` after it; the SDK raises ``openai.APIError`` on it (``_streaming.py``: a data
payload with an ``error`` member), with ``code``/``param``/``type`` from the envelope::

    data: {"error":{"type":..,"code":..,"message":..,"param":..},"request_id":"req_.."}

Hot path: the chunk prefix and suffix are serialised once per stream; each event
costs one ``orjson.dumps`` of its string and a few byte concatenations. A released held
call's ``ToolCallStart`` + ``ToolCallDelta`` become a single chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from gateway.canonical import (
    DEFAULT_REFUSAL,
    Finish,
    RefusalDelta,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    ToolCallStart,
    UsageReport,
    WireEvent,
)
from gateway.dialects.openai.encode import encode_usage, url_citation
from gateway.enforcement.holdback import Choice, FinalUsage, HeldEvent
from gateway.errors import GatewayError

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keep-alive\n\n"

_dumps = orjson.dumps


def error_event(exc: GatewayError, request_id: str) -> bytes:
    """The in-band error event (the stream ends after it; no ``[DONE]``)."""
    return b"data: " + _dumps(exc.envelope(request_id)) + b"\n\n"


class ChunkEncoder:
    """Encodes one stream's events. Create one per response."""

    __slots__ = (
        "_common",
        "_finish_tail",
        "_head",
        "_heads",
        "_id_part",
        "_index",
        "_refused",
        "_tail",
        "_usage_head",
        "_usage_null",
        "choices",
        "include_usage",
    )

    def __init__(
        self,
        *,
        completion_id: str,
        model: str,
        created: int,
        include_usage: bool = False,
        choices: int = 1,
    ) -> None:
        self.include_usage = include_usage
        self.choices = choices
        self._id_part = (
            b'{"id":'
            + _dumps(completion_id)
            + b',"object":"chat.completion.chunk","created":'
            + str(int(created)).encode()
            + b',"model":'
            + _dumps(model)
        )
        self._usage_null = b',"usage":null' if include_usage else b""
        self._index = 0
        self._refused: set[int] = set()  # choices that sent a refusal delta
        self._tail = b',"logprobs":null,"finish_reason":null}]' + self._usage_null + b"}\n\n"
        self._finish_tail = b"}]" + self._usage_null + b"}\n\n"
        self._prefix({})

    def _prefix(self, fields: dict[str, object]) -> None:
        """The members every chunk starts with; ``fields`` are the upstream's
        ``system_fingerprint`` and ``service_tier``."""
        common = (
            self._id_part + b',"system_fingerprint":' + _dumps(fields.get("system_fingerprint"))
        )
        if fields.get("service_tier") is not None:
            common += b',"service_tier":' + _dumps(fields["service_tier"])
        self._common = common
        self._heads: dict[int, bytes] = {}
        self._usage_head = b"data: " + common + b',"choices":[],"usage":'
        self.choice(self._index)

    def fields(self, event: WireEvent) -> None:
        """The upstream's answer fields, from chunks on (either OpenAI wire)."""
        data = event.data
        if event.wire != "openai":  # Responses has a service_tier, no fingerprint
            data = {"service_tier": data.get("service_tier")}
        self._prefix(data)

    def _chunk(self, delta: bytes) -> bytes:
        return self._head + delta + self._tail

    def choice(self, index: int) -> None:
        """Chunks from now on belong to choice ``index`` (``n > 1``)."""
        self._index = index
        head = self._heads.get(index)
        if head is None:
            head = self._heads[index] = (
                b"data: "
                + self._common
                + b',"choices":[{"index":'
                + str(index).encode()
                + b',"delta":'
            )
        self._head = head

    def role(self) -> bytes:
        """The first chunk of each choice: ``delta.role`` (sent as soon as the upstream
        answered)."""
        out = []
        for index in range(self.choices):
            self.choice(index)
            out.append(self._chunk(b'{"role":"assistant","content":""}'))
        self.choice(0)
        return b"".join(out)

    def _scored(self, delta: bytes, logprobs: dict[str, object]) -> bytes:
        return (
            self._head
            + delta
            + b',"logprobs":'
            + _dumps(logprobs)
            + b',"finish_reason":null}]'
            + self._usage_null
            + b"}\n\n"
        )

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...] | None = None) -> bytes:
        delta = b'{"content":' + _dumps(text) + b"}"
        if logprobs is None:
            return self._chunk(delta)
        return self._scored(delta, {"content": logprobs, "refusal": None})

    def refusal(self, text: str, logprobs: tuple[TokenLogprob, ...] | None = None) -> bytes:
        if not text:
            return b""
        self._refused.add(self._index)
        delta = b'{"refusal":' + _dumps(text) + b"}"
        if logprobs is None:
            return self._chunk(delta)
        return self._scored(delta, {"content": None, "refusal": logprobs})

    def tool_start(self, event: ToolCallStart, arguments: str = "") -> bytes:
        return self._chunk(
            b'{"tool_calls":[{"index":'
            + str(event.index).encode()
            + b',"id":'
            + _dumps(event.id)
            + b',"type":"function","function":{"name":'
            + _dumps(event.name)
            + b',"arguments":'
            + _dumps(arguments)
            + b"}}]}"
        )

    def tool_arguments(self, event: ToolCallDelta) -> bytes:
        return self._chunk(
            b'{"tool_calls":[{"index":'
            + str(event.index).encode()
            + b',"function":{"arguments":'
            + _dumps(event.arguments)
            + b"}}]}"
        )

    def finish(self, event: Finish) -> bytes:
        # A refusal without words of its own (Anthropic's) still says it is one.
        said = (
            b""
            if not event.refused or self._index in self._refused
            else (self.refusal(DEFAULT_REFUSAL))
        )
        return said + (
            self._head
            + b'{},"logprobs":null,"finish_reason":'
            + _dumps(event.reason)
            + self._finish_tail
        )

    def usage(self, final: FinalUsage) -> bytes:
        """The usage chunk (only with ``stream_options.include_usage``), then nothing."""
        if not self.include_usage:
            return b""
        return self._usage_head + _dumps(encode_usage(final.usage, final.schema_retries)) + b"}\n\n"

    def encode(self, batch: Sequence[HeldEvent]) -> bytes:
        """One batch -> the bytes of its chunks. ``FinalUsage`` adds the usage chunk and
        ``[DONE]``; an upstream ``UsageReport`` is not forwarded (the hold-back totals it)."""
        parts: list[bytes] = []
        i, n = 0, len(batch)
        while i < n:
            event = batch[i]
            i += 1
            if isinstance(event, TextDelta):
                parts.append(self.text(event.text, event.logprobs))
            elif isinstance(event, RefusalDelta):
                parts.append(self.refusal(event.text, event.logprobs))
            elif isinstance(event, ToolCallDelta):
                parts.append(self.tool_arguments(event))
            elif isinstance(event, ToolCallStart):
                nxt = batch[i] if i < n else None
                if isinstance(nxt, ToolCallDelta) and nxt.index == event.index:
                    parts.append(self.tool_start(event, nxt.arguments))
                    i += 1
                else:
                    parts.append(self.tool_start(event))
            elif isinstance(event, Finish):
                parts.append(self.finish(event))
            elif isinstance(event, FinalUsage):
                parts.append(self.usage(event))
                parts.append(DONE)
            elif isinstance(event, Choice):
                self.choice(event.index)
            elif isinstance(event, WireEvent):
                if event.kind == "fields" and event.wire != "anthropic":
                    self.fields(event)
                elif event.kind == "delta" and event.wire == "openai":
                    parts.append(self._chunk(_dumps(event.data)))
                elif event.wire != "openai" and event.citations:
                    # another wire's web citations, as chat spells them
                    cited = [url_citation(c) for c in event.citations if c.link]
                    if cited:
                        parts.append(self._chunk(_dumps({"annotations": cited})))
                # another wire's other events (reasoning, thinking) have no place here
            elif isinstance(event, UsageReport):
                continue
        return b"".join(parts)


__all__ = ["DONE", "KEEPALIVE", "ChunkEncoder", "error_event"]
