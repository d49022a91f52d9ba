"""Prompt token counts for OpenAI models, offline: ``bpe-openai`` ships the encodings
(``tiktoken`` fetches its encoding files from the internet on first use).

The count is an estimate of what an OpenAI chat upstream will bill as prompt tokens: the
messages' text, tool call arguments and tool definitions through the model's encoding
(``o200k_base`` for a model the library does not know), plus OpenAI's documented framing
of a few tokens per message. Images count nothing here.

Example::

    n = await count_openai_tokens(request, "gpt-4o")
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any

import orjson

from gateway.canonical import ChatRequest, ChatResponse, Usage

__all__ = ["count_openai_tokens", "estimate_tokens", "estimated_usage", "prompt_texts"]

_PER_MESSAGE = 3  # <|start|>role ... <|end|>, as OpenAI's cookbook counts them
_REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|>
_FALLBACK = "o200k_base"
_lock = threading.Lock()  # loading an encoding takes about a second: one build at a time


@functools.cache
def _encoding(model: str) -> Any:
    import bpe_openai  # heavy: imported on first use, never at gateway start

    with _lock:
        try:
            return bpe_openai.encoding_for_model(model)
        except (bpe_openai.UnsupportedModelError, KeyError, ValueError):
            return bpe_openai.get_encoding(_FALLBACK)


def prompt_texts(request: ChatRequest) -> list[str]:
    """What a prompt's tokens are counted over: each message's role, text and tool calls,
    and each tool's definition as JSON."""
    out: list[str] = []
    for message in request.messages:
        out.append(message.role)
        out.append(message.text)
        out.extend(call.name + call.raw_arguments for call in message.tool_calls)
    for tool in request.tools:
        out.append(
            orjson.dumps(
                {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            ).decode()
        )
    return out


def _count(request: ChatRequest, model: str) -> int:
    encoding = _encoding(model)
    texts = prompt_texts(request)
    tokens = sum(len(encoding.encode(text, disallowed_special=())) for text in texts)
    return tokens + _PER_MESSAGE * len(request.messages) + _REPLY_PRIMING


async def count_openai_tokens(request: ChatRequest, model: str) -> int:
    """The estimate, off the event loop (encoding a long prompt takes milliseconds)."""
    return await asyncio.to_thread(_count, request, model)


def estimate_tokens(body_bytes: int) -> int:
    """The gateway's rough estimate everywhere else: a token per four bytes."""
    return body_bytes // 4


def estimated_usage(request_bytes: int, response: ChatResponse) -> Usage:
    """What to bill for an answer that came without usage: the request body sent and the
    text that came back at four bytes (characters) a token, marked ``estimated``."""
    chars = len(response.content or "") + sum(
        len(c.name) + len(c.raw_arguments) for c in response.tool_calls
    )
    return Usage(estimate_tokens(request_bytes), (chars + 3) // 4, estimated=True)
