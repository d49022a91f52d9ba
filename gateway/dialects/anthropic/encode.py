"""Canonical response -> Anthropic Messages JSON, and the error envelope for this dialect.

Tool-use blocks carry ``input`` as an object (the validated arguments, parsed), never the
JSON text. ``usage`` has Anthropic's token counts (``input_tokens`` without the cached
ones, which are apart) and adds ``schema_retries``.

Example::

    body = encode_response(response, model="amara-s1.2", schema_retries=1)
    body["content"][0]  # {'type': 'tool_use', 'id': 'call_1', 'name': ..., 'input': {...}}
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import orjson

from gateway.canonical import ChatResponse, Citation, FinishReason, ToolCall, Usage, overlaid
from gateway.errors import GatewayError, UpstreamError

__all__ = [
    "STOP_REASONS",
    "encode_error",
    "encode_response",
    "kept_stop_reason",
    "message_id",
    "stop_reason",
    "tool_input",
]

STOP_REASONS: dict[FinishReason, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}


def stop_reason(
    reason: FinishReason,
    stop_sequence: str | None = None,
    *,
    tool_use: bool = False,
    refused: bool = False,
) -> str:
    """The Anthropic ``stop_reason`` for a canonical finish reason.

    Some OpenAI-compatible servers finish a tool-calling turn with ``stop``; Messages
    clients run tools when ``stop_reason == "tool_use"``, so a turn with tool calls says so.
    A refused turn is ``refusal`` whichever wire it came from.
    """
    if refused:
        return "refusal"
    if reason == "stop" and tool_use:
        return "tool_use"
    if reason == "stop" and stop_sequence is not None:
        return "stop_sequence"
    return STOP_REASONS[reason]


def message_id(upstream_id: str) -> str:
    """A ``msg_``-prefixed id, reusing the upstream's id when it has one."""
    if upstream_id.startswith("msg_"):
        return upstream_id
    suffix = "".join(c for c in upstream_id if c.isalnum() or c in "_-")
    return f"msg_{suffix or secrets.token_hex(12)}"


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as the object Anthropic clients expect.

    Strict calls are validated (root is an object) before they get here. A non-strict call
    whose arguments are not a JSON object cannot be expressed in this wire format, so it is
    reported as an upstream failure rather than silently replaced.
    """
    try:
        value = orjson.loads(call.raw_arguments or "{}")
    except orjson.JSONDecodeError as exc:
        raise UpstreamError(
            f"The model's arguments for {call.name} are not valid JSON.",
            code="upstream_invalid_response",
        ) from exc
    if not isinstance(value, dict):
        raise UpstreamError(
            f"The model's arguments for {call.name} are not a JSON object.",
            code="upstream_invalid_response",
        )
    return value


def encode_usage(usage: Usage, schema_retries: int) -> dict[str, Any]:
    """``usage`` as ``anthropic.types.Usage``: ``input_tokens`` are the uncached ones only,
    the cache's apart (never a sum), ``output_tokens_details.thinking_tokens`` when the
    model reasoned; plus ``schema_retries``, and ``estimated: true`` when the gateway
    estimated it (the upstream reported none)."""
    out: dict[str, Any] = {
        "input_tokens": usage.uncached_prompt_tokens,
        "cache_creation_input_tokens": usage.cache_creation_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.completion_tokens,
    }
    if usage.reasoning_tokens:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    out["schema_retries"] = schema_retries
    if usage.estimated:
        out["estimated"] = True
    if usage.kept is not None and usage.kept.wire == "anthropic":
        overlaid(out, usage.kept.fields)  # server_tool_use, cache_creation, ...: as sent
    return out


def encode_response(
    response: ChatResponse,
    *,
    model: str,
    schema_retries: int = 0,
    stop_sequence: str | None = None,
) -> dict[str, Any]:
    """The Anthropic ``message`` object for one final answer. ``model`` is the catalogue
    name the client asked for (not the upstream's served name); ``stop_sequence`` defaults
    to the one the upstream reported."""
    if stop_sequence is None:
        stop_sequence = response.stop_sequence
    content: list[dict[str, Any]] = []
    # Only an Anthropic upstream's citations: another wire's web citation has no
    # encrypted index to give.
    cited = [c for c in response.citations if c.wire == "anthropic"]
    at = 0  # characters of text so far
    for part in response.parts():
        if isinstance(part, str):
            content.extend(text_blocks(part, at, cited))
            at += len(part)
        elif isinstance(part, ToolCall):
            block = {
                "type": "tool_use",
                "id": part.id,
                "name": part.name,
                "input": tool_input(part),
            }
            if part.members is not None and part.members.wire == "anthropic":
                block.update(part.members.fields)  # caller, toolset_name: as sent
            content.append(block)
        elif part.wire == "anthropic":
            # Thinking blocks (a signature is Anthropic's own), server tools' use and
            # results: only from an Anthropic upstream, as sent.
            content.append(part.raw)
    if response.refusal:  # what the model said instead (OpenAI's refusal text)
        where = [i for i, b in enumerate(content) if b["type"] == "text"]
        at = where[-1] + 1 if where else sum(1 for b in content if b["type"] in _THINKING)
        content.insert(at, {"type": "text", "text": response.refusal})
    fields = (
        response.passthrough.response
        if (response.passthrough is not None and response.passthrough.wire == "anthropic")
        else {}
    )
    body = {
        "id": message_id(response.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": kept_stop_reason(
            stop_reason(
                response.finish_reason,
                stop_sequence,
                tool_use=bool(response.tool_calls),
                refused=response.refusal is not None,
            ),
            response.finish_reason,
            fields,
        ),
        "stop_sequence": stop_sequence,
        "usage": encode_usage(response.usage, schema_retries),
    }
    # container, stop_details, diagnostics: as the upstream sent them
    body.update((k, v) for k, v in fields.items() if k != "stop_reason")
    return body


_THINKING = frozenset({"thinking", "redacted_thinking"})


def text_blocks(text: str, at: int, cited: list[Citation]) -> list[dict[str, Any]]:
    """``text`` (starting at character ``at`` of the answer) as text blocks: one per
    cited span, each with its citations as sent, and the text between them."""
    end = at + len(text)
    cuts = sorted({at, end, *(p for c in cited for p in (c.start, c.end) if at < p < end)})
    blocks = []
    for start, stop in pairwise(cuts):
        block: dict[str, Any] = {"type": "text", "text": text[start - at : stop - at]}
        own = [c.raw for c in cited if c.start == start and c.end == stop]
        if own:
            block["citations"] = own
        blocks.append(block)
    return blocks or [{"type": "text", "text": text}]


def kept_stop_reason(said: str, reason: FinishReason, fields: Mapping[str, Any]) -> str:
    """The upstream's own ``stop_reason`` (``pause_turn``, ...) when the gateway would say
    no more than what its finish reason maps to; else ``said``."""
    kept = fields.get("stop_reason")
    return kept if isinstance(kept, str) and said == STOP_REASONS[reason] else said


def encode_error(error: GatewayError, request_id: str) -> dict[str, Any]:
    """The unified envelope in Anthropic's vocabulary, with its top-level
    ``"type": "error"``: the stream's ``error`` event (the shared middleware renders the
    same body for a non-streaming error on ``/v1/messages``)."""
    return error.envelope(request_id, "anthropic")
