"""Canonical messages, tools, tool calls and responses."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from gateway.canonical.origin import Origin
from gateway.canonical.record import record

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


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
class ToolCall:
    """A tool call as the model sent it. ``raw_arguments`` is the JSON text, kept verbatim."""

    id: str
    name: str
    raw_arguments: str


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
    # The client's wire, body and vendor headers (None: built by the gateway itself).
    origin: Origin | None = None

    def tool(self, name: str) -> ToolSpec | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None


@record
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


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
