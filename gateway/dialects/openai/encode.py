"""Canonical ``ChatResponse`` -> chat-completions response JSON (``chat.completion``)."""

from __future__ import annotations

from typing import Any

from gateway.canonical import ChatResponse


def encode_chat_response(
    response: ChatResponse, *, model: str, request_id: str, schema_retries: int
) -> dict[str, Any]:
    """The ``chat.completion`` object; ``model`` is the catalogue name the client sent and
    ``usage`` (summed over every upstream call) gains ``schema_retries``."""
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
    usage = response.usage
    return {
        "id": response.id or "chatcmpl-" + request_id.removeprefix("req_"),
        "object": "chat.completion",
        "created": response.created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": response.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "schema_retries": schema_retries,
        },
        "system_fingerprint": None,
    }
