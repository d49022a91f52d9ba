"""Canonical messages, tools, tool calls and responses."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import field
from itertools import pairwise
from typing import Any, Literal
from urllib.parse import quote

from gateway.canonical.origin import Origin
from gateway.canonical.record import record

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
# The wire format a raw value is spelled in: chat completions, Responses, Anthropic Messages.
# The wire an answer part came from, as the upstream adapters name it (provider side).
AnswerWire = Literal["openai", "responses", "anthropic"]
# What a refusal says when the upstream refused without words (Anthropic may send none), so
# a client that tests ``message.refusal`` for truth still sees one.
DEFAULT_REFUSAL = "The model declined to answer this request."
# What a strict call still invalid after its correction becomes: the request's 422
# (``error``), or a 200 answer that says what went wrong (``tool_error``).
OnInvalid = Literal["error", "tool_error"]


@record
class TextPart:
    text: str


@record
class ImagePart:
    """An image passed through. Either ``url`` (http(s) or data: URL) or base64 ``data``."""

    url: str | None = None
    media_type: str | None = None
    data: str | None = None
    # OpenAI's detail level (``auto``, ``low``, ``high``, ``original``); None: not said.
    detail: str | None = None


ContentPart = TextPart | ImagePart


@record
class Reasoning:
    """Reasoning the model produced, sealed by its provider: an Anthropic ``thinking`` or
    ``redacted_thinking`` block, or a Responses ``reasoning`` item. ``raw`` is the block or
    item as the upstream sent it (``signature``, ``encrypted_content`` inside), returned
    unchanged to a client and an upstream of the same ``wire``; ``text`` is its readable
    part (the thinking, or the summary), empty when redacted or encrypted."""

    wire: AnswerWire
    raw: dict[str, Any]
    text: str = ""


@record
class Passthrough:
    """Members of an upstream's answer that the gateway does not interpret, as that
    upstream's ``wire`` spelled them, for a client of the same wire: ``response`` at the
    top level (``service_tier``, ``system_fingerprint``), ``message`` inside the chat
    message (``annotations``, ``audio``, ``reasoning_content``, ...), ``messages`` each
    Responses message item's own (``phase``), in order."""

    wire: AnswerWire
    response: dict[str, Any] = field(default_factory=dict)
    message: dict[str, Any] = field(default_factory=dict)
    messages: tuple[dict[str, Any], ...] = ()

    @property
    def service_tier(self) -> Any:
        """OpenAI's ``service_tier``, which chat completions and Responses share."""
        return self.response.get("service_tier") if self.wire != "anthropic" else None


TokenLogprob = dict[str, Any]
"""One token's log probability as both OpenAI APIs spell it: ``token``, ``logprob``,
``bytes``, ``top_logprobs``."""


@record
class Logprobs:
    """An answer's token log probabilities: ``content`` for its text, ``refusal`` for a
    refusal's words (chat ``choices[].logprobs``, Responses ``output_text.logprobs``)."""

    content: tuple[TokenLogprob, ...] | None = None
    refusal: tuple[TokenLogprob, ...] | None = None


@record
class ToolCall:
    """A tool call as the model sent it. ``raw_arguments`` is the JSON text, kept verbatim.
    ``namespace``: the Responses namespace tool the function is in (names are unique
    across namespaces, so the name alone picks its schema)."""

    id: str
    name: str
    raw_arguments: str
    namespace: str | None = None
    members: Members | None = None


@record
class WireItem:
    """A part of an upstream's answer the gateway does not interpret: a Responses output
    item (``web_search_call``, ``custom_tool_call``, ``mcp_call``, ...), an Anthropic
    content block (``server_tool_use``, ``web_search_tool_result``, ...) or a chat
    ``custom`` tool call. ``raw`` as the upstream's ``wire`` sent it, for a client of the
    same wire; another wire's client cannot be given it (``notice`` names it).
    ``client_call``: a call the client runs (a custom tool, a local shell), which makes
    the turn a tool turn as a function call does."""

    wire: AnswerWire
    kind: str
    raw: dict[str, Any]
    client_call: bool = False

    @property
    def notice(self) -> str:
        """Its name in ``x-syntic-dropped``: where the upstream put it, and its type
        (percent-encoded and bounded: the upstream's string goes into a header)."""
        return f"{_ANSWER_PLACES[self.wire]}.{quote(self.kind[:64], safe='-_.')}"


_ANSWER_PLACES: dict[str, str] = {
    "openai": "message.tool_calls[]",
    "responses": "output[]",
    "anthropic": "content[]",
}


@record
class Citation:
    """A source the answer's text cites, as the upstream's ``wire`` spelled it (``raw``):
    an entry of an Anthropic text block's ``citations``, a Responses ``output_text``
    annotation, a chat ``message.annotations`` entry. ``start`` and ``end`` are the
    characters of the answer's whole text it covers (an Anthropic citation covers its
    text block; a Responses ``file_citation`` is a point, ``start == end``)."""

    wire: AnswerWire
    raw: dict[str, Any]
    start: int
    end: int

    @property
    def kind(self) -> str:
        return str(self.raw.get("type"))

    @property
    def link(self) -> tuple[str, str] | None:
        """``(url, title)`` of a web page citation, which every wire but Anthropic's can
        say as a ``url_citation``; None for other kinds (files, documents)."""
        raw = self.raw
        if self.kind == "url_citation":
            raw = raw.get("url_citation", raw) if self.wire == "openai" else raw
        elif self.kind != "web_search_result_location":
            return None
        url, title = raw.get("url"), raw.get("title")
        if not isinstance(url, str):
            return None
        return url, title if isinstance(title, str) else ""

    @property
    def notice(self) -> str:
        """Its name in ``x-syntic-dropped`` for a client that cannot be given it."""
        return f"{_CITATION_PLACES[self.wire]}.{quote(self.kind[:64], safe='-_.')}"


def place_citations(
    citations: tuple[Citation, ...], bounds: list[tuple[int, int]]
) -> list[list[Citation]]:
    """``citations`` shared among text segments covering ``bounds`` (``(start, end)`` in
    the answer's text, in order): each goes to the segment its ``start`` is in, a point at
    a segment's end to that segment, what lies beyond every segment to the last."""
    out: list[list[Citation]] = [[] for _ in bounds]
    if not bounds:
        return out
    for c in citations:
        at = next((i for i, (s, e) in enumerate(bounds) if s <= c.start < e), None)
        if at is None:
            at = next((i for i, (_, e) in enumerate(bounds) if c.start == e), len(bounds) - 1)
        out[at].append(c)
    return out


_CITATION_PLACES: dict[str, str] = {
    "openai": "message.annotations[]",
    "responses": "output[].content[].annotations[]",
    "anthropic": "content[].citations[]",
}


@record
class Members:
    """Members of an answer part the gateway does not interpret, as the upstream's
    ``wire`` spelled them (an Anthropic ``tool_use`` block's ``caller``, a Responses
    ``function_call``'s ``caller``), for a client of the same wire."""

    wire: AnswerWire
    fields: dict[str, Any]


# One part of an answer in the upstream's order: reasoning ``i``, the text up to
# character ``n``, tool call ``i``, item ``i``.
SlotKind = Literal["reasoning", "text", "call", "item"]
Slot = tuple[SlotKind, int]


@record
class Message:
    """One conversation turn.

    ``tool`` messages carry ``tool_call_id`` and the result as content. Assistant messages
    may carry ``tool_calls``. ``is_error`` marks a tool result the client flagged as failed.
    """

    role: Role
    content: tuple[ContentPart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    # An assistant turn's reasoning as the client sent it back (before its content).
    reasoning: tuple[Reasoning, ...] = ()

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@record
class ToolSpec:
    """A function tool. ``parameters`` is the client's JSON Schema, untouched."""

    name: str
    parameters: dict[str, Any]
    description: str | None = None
    strict: bool = False


@record
class ForcedTool:
    name: str


ToolChoice = Literal["auto", "none", "required"] | ForcedTool


@record
class JsonSchemaFormat:
    """Structured output: the assistant's text content must be JSON matching ``schema``."""

    schema: dict[str, Any]
    name: str = "output"
    strict: bool = False
    description: str | None = None


ResponseFormat = JsonSchemaFormat | Literal["text", "json_object"]


@record
class ChatRequest:
    """A dialect-neutral chat request. ``model`` is the catalogue name the client sent."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    stream: bool = False
    parallel_tool_calls: bool | None = None
    user: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Choices wanted; the gateway asks the upstream once per choice (each validated and
    # corrected on its own), so upstream adapters never see it.
    n: int = 1
    # Make every tool strict through the strict projection (header ``x-syntic-strictify``).
    strictify: bool = False
    # ``x-syntic-on-invalid``; None: the model's ``on_invalid``.
    on_invalid: OnInvalid | None = None
    # The client's wire, body and vendor headers (None: built by the gateway itself).
    origin: Origin | None = None
    # The bytes of client JSON it came from (a stored history included), set when large:
    # what re-encoding it for an upstream costs, so that happens off the event loop.
    body_bytes: int = 0

    def tool(self, name: str) -> ToolSpec | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None


@record
class Usage:
    """Token counts of one or more upstream calls, in one meaning whatever the wire.

    ``prompt_tokens`` is every input token, cached or not (OpenAI's ``prompt_tokens``;
    Anthropic's ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``);
    ``cache_read_tokens`` and ``cache_creation_tokens`` are the parts of it read from and
    written to the provider's prompt cache. ``completion_tokens`` is every output token,
    reasoning included; ``reasoning_tokens`` is the part spent reasoning. ``estimated``:
    the upstream reported nothing and the gateway estimated the figures (a sum is
    estimated when any part is).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False
    # The wire's other usage members (Anthropic's ``server_tool_use``, ``cache_creation``,
    # ``service_tier``; chat's ``audio_tokens``...), for a client of the same wire.
    kept: Members | None = None

    def __add__(self, other: Usage) -> Usage:
        # Immutable, so a zero side (a tally's start) leaves the other as it is.
        if _zero(other):
            return self
        if _zero(self):
            return other
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_creation_tokens + other.cache_creation_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.estimated or other.estimated,
            _add_kept(self.kept, other.kept),
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def uncached_prompt_tokens(self) -> int:
        """Input tokens neither read from nor written to the cache (Anthropic's
        ``input_tokens``)."""
        return max(0, self.prompt_tokens - self.cache_read_tokens - self.cache_creation_tokens)


def _zero(u: Usage) -> bool:
    """``u`` adds nothing to a sum: no tokens, not estimated, no members kept."""
    return not (
        u.prompt_tokens
        or u.completion_tokens
        or u.cache_read_tokens
        or u.cache_creation_tokens
        or u.reasoning_tokens
        or u.estimated
        or u.kept is not None
    )


def _add_kept(a: Members | None, b: Members | None) -> Members | None:
    if a is None or b is None or a.wire != b.wire:
        return a or b
    return Members(a.wire, summed(a.fields, b.fields))


def summed(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two usage objects' members as one: counts added (nested objects member by member),
    anything else as ``a`` has it (a tier, a region), else as ``b``."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        if mine is None:
            out[key] = value
        elif isinstance(mine, dict) and isinstance(value, dict):
            out[key] = summed(mine, value)
        elif type(mine) is int and type(value) is int:
            out[key] = mine + value
    return out


def overlaid(base: dict[str, Any], kept: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (what the gateway writes) with ``kept``'s members where it has none,
    nested objects merged: the gateway's own figures win."""
    for key, value in kept.items():
        mine = base.get(key)
        if mine is None:
            base[key] = value
        elif isinstance(mine, dict) and isinstance(value, Mapping):
            overlaid(mine, value)
    return base


def usage_kept(
    wire: AnswerWire, raw: Mapping[str, Any], known: Mapping[str, Any]
) -> Members | None:
    """The members of a usage object ``raw`` that ``known`` does not name (a name mapped
    to a set names those members of a nested object), or None."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        inner = known.get(key)
        if inner is None:
            out[key] = value
        elif isinstance(inner, frozenset) and isinstance(value, Mapping):
            rest = {k: v for k, v in value.items() if k not in inner and v is not None}
            if rest:
                out[key] = rest
    return Members(wire, out) if out else None


@record
class ChatResponse:
    """One assistant turn from an upstream (or the gateway's final answer)."""

    id: str
    model: str
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage
    created: int = 0
    # Which of the request's ``stop`` strings ended the turn, when the provider says
    # (Anthropic does; its Messages dialect reports ``stop_reason: "stop_sequence"``).
    stop_sequence: str | None = None
    # Not None: the model refused, saying this (possibly "" when it said nothing). A
    # refusal is an answer: strict output and strict tools do not validate it.
    refusal: str | None = None
    # Reasoning the answer carried, in order, before its content and tool calls.
    reasoning: tuple[Reasoning, ...] = ()
    logprobs: Logprobs | None = None
    passthrough: Passthrough | None = None
    # Parts the gateway does not interpret, and the upstream's order of every part when
    # it sent any (``parts``); empty: reasoning, then the text, then the calls.
    items: tuple[WireItem, ...] = ()
    layout: tuple[Slot, ...] = ()
    # What the text cites, in order.
    citations: tuple[Citation, ...] = ()

    def parts(self) -> Iterator[Part]:
        """The answer's parts in the upstream's order: its reasoning, its text (``str``)
        in the segments the upstream cut it into, its tool calls and items. A part the
        layout does not place (a corrected answer's) comes where the default order puts
        it."""
        text = self.content or ""
        if not self.layout:
            yield from self.reasoning
            if text:
                yield text
            yield from self.tool_calls
            return
        seen = [False] * len(self.tool_calls)
        texts = sum(1 for kind, _ in self.layout if kind == "text")
        start = t = 0
        for kind, n in self.layout:
            if kind == "reasoning" and n < len(self.reasoning):
                yield self.reasoning[n]
            elif kind == "call" and n < len(self.tool_calls):
                seen[n] = True
                yield self.tool_calls[n]
            elif kind == "item" and n < len(self.items):
                yield self.items[n]
            elif kind == "text":
                t += 1  # the last segment takes the rest
                end = len(text) if t == texts else min(n, len(text))
                if end > start:
                    yield text[start:end]
                    start = end
        if start < len(text):
            yield text[start:]
        yield from (c for c, done in zip(self.tool_calls, seen, strict=True) if not done)

    @property
    def calls_tools(self) -> bool:
        """Whether the turn calls a tool: a function call or an item the client runs."""
        return bool(self.tool_calls) or any(i.client_call for i in self.items)


_RANK = {"reasoning": 0, "text": 1, "call": 2, "item": 3}


def answer_layout(slots: list[Slot], items: list[WireItem]) -> tuple[Slot, ...]:
    """``ChatResponse.layout`` for an answer whose parts came in ``slots``: kept when it
    carried items or its parts are out of the default order (reasoning, text, calls)."""
    ranks = [_RANK[kind] for kind, _ in slots]
    if items or any(a > b for a, b in pairwise(ranks)):
        return tuple(slots)
    return ()


Part = Reasoning | str | ToolCall | WireItem
"""One part of an answer (``ChatResponse.parts``): reasoning, a segment of its text, a
tool call, an item the gateway does not interpret."""
