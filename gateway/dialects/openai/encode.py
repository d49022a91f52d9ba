"""Canonical ``ChatResponse`` -> chat-completions response JSON (``chat.completion``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.canonical import DEFAULT_REFUSAL, ChatResponse, Usage


def refusal_text(refusal: str | None) -> str | None:
    """``message.refusal``: the model's words, never "" for a refusal (clients test it for
    truth)."""
    if refusal is None:
        return None
    return refusal or DEFAULT_REFUSAL


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
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "schema_retries": schema_retries,
        },
        "system_fingerprint": None,
    }


def _message(response: ChatResponse) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": response.content,
        "refusal": refusal_text(response.refusal),
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
