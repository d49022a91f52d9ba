"""Canonical ``ChatResponse`` -> chat-completions response JSON (``chat.completion``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.canonical import ChatResponse, Usage


def encode_chat_response(
    response: ChatResponse, *, model: str, request_id: str, schema_retries: int
) -> dict[str, Any]:
    """The ``chat.completion`` object; ``model`` is the catalogue name the client sent and
    ``usage`` (summed over every upstream call) gains ``schema_retries``."""
    return encode_chat_choices(
        [response],
        usage=response.usage,
        model=model,
        request_id=request_id,
        schema_retries=schema_retries,
    )


def encode_chat_choices(
    responses: Sequence[ChatResponse],
    *,
    usage: Usage,
    model: str,
    request_id: str,
    schema_retries: int,
) -> dict[str, Any]:
    """The ``chat.completion`` object with one choice per response (``n``), in order."""
    first = responses[0]
    return {
        "id": first.id or "chatcmpl-" + request_id.removeprefix("req_"),
        "object": "chat.completion",
        "created": first.created,
        "model": model,
        "choices": [
            {
                "index": i,
                "message": _message(response),
                "finish_reason": response.finish_reason,
                "logprobs": None,
            }
            for i, response in enumerate(responses)
        ],
        "usage": encode_usage(usage, schema_retries),
        "system_fingerprint": None,
    }


def encode_usage(usage: Usage, schema_retries: int) -> dict[str, Any]:
    """``usage`` as ``openai.types.CompletionUsage`` (``prompt_tokens`` counts the cached
    ones too), plus ``schema_retries``, and ``estimated: true`` when the gateway estimated
    it (the upstream reported none)."""
    prompt_details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
    if usage.cache_creation_tokens:
        prompt_details["cache_write_tokens"] = usage.cache_creation_tokens
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "schema_retries": schema_retries,
    }
    if usage.estimated:
        out["estimated"] = True
    return out


def _message(response: ChatResponse) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": response.content,
        "refusal": None,
    }
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments},
            }
            for c in response.tool_calls
        ]
    return message
