"""The canonical request/response model shared by both dialects and every upstream.

Immutable slotted dataclasses (``@record``: frozen to the type checker, a plain
dataclass's constructor cost at run time), no HTTP types. Dialects decode wire JSON
into these and encode them back; upstream adapters translate them to and from a
provider's wire format; the enforcement loop only ever sees these.
"""

from __future__ import annotations

from gateway.canonical.events import (
    Finish,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    UsageReport,
)
from gateway.canonical.model import (
    ChatRequest,
    ChatResponse,
    ContentPart,
    FinishReason,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    Message,
    ResponseFormat,
    Role,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolSpec,
    Usage,
)
from gateway.canonical.origin import NO_SCREEN, Header, Origin, Screen, Target, Wire

__all__ = [
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
    "Message",
    "Origin",
    "ResponseFormat",
    "Role",
    "Screen",
    "StreamEvent",
    "Target",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolChoice",
    "ToolSpec",
    "Usage",
    "UsageReport",
    "Wire",
]
