"""The canonical request/response model shared by both dialects and every upstream.

Immutable slotted dataclasses (``@record``: frozen to the type checker, a plain
dataclass's constructor cost at run time), no HTTP types. Dialects decode wire JSON
into these and encode them back; upstream adapters translate them to and from a
provider's wire format; the enforcement loop only ever sees these.
"""

from __future__ import annotations

from gateway.canonical.events import (
    Finish,
    RefusalDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    UsageReport,
    WireEvent,
)
from gateway.canonical.model import (
    DEFAULT_REFUSAL,
    ChatRequest,
    ChatResponse,
    ContentPart,
    FinishReason,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    Logprobs,
    Message,
    OnInvalid,
    Part,
    Passthrough,
    Reasoning,
    ResponseFormat,
    Role,
    Slot,
    TextPart,
    TokenLogprob,
    ToolCall,
    ToolChoice,
    ToolSpec,
    Usage,
    WireItem,
    answer_layout,
)
from gateway.canonical.origin import NO_SCREEN, Header, Origin, Screen, Target, Wire

__all__ = [
    "DEFAULT_REFUSAL",
    "NO_SCREEN",
    "ChatRequest",
    "ChatResponse",
    "ContentPart",
    "Finish",
    "FinishReason",
    "ForcedTool",
    "Header",
    "ImagePart",
    "JsonSchemaFormat",
    "Logprobs",
    "Message",
    "OnInvalid",
    "Origin",
    "Part",
    "Passthrough",
    "Reasoning",
    "RefusalDelta",
    "ResponseFormat",
    "Role",
    "Screen",
    "Slot",
    "StreamEvent",
    "Target",
    "TextDelta",
    "TextPart",
    "TokenLogprob",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolChoice",
    "ToolSpec",
    "Usage",
    "UsageReport",
    "Wire",
    "WireEvent",
    "WireItem",
    "answer_layout",
]
