"""Helpers for the chat-completions end-to-end tests: tools, and a sync/async SDK caller."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
        "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
        "note": {"type": ["string", "null"], "maxLength": 200},
    },
    "required": ["order_number", "amount_pence", "reason", "note"],
    "additionalProperties": False,
}
GOOD_ARGS = '{"order_number": "582131", "amount_pence": 1250, "reason": "damaged", "note": null}'
BAD_ARGS = '{"order_number": "582131", "amount_pence": "12.50", "reason": "damaged", "note": null}'
MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Order 582131 arrived crushed, please refund the £12.50 pot."},
]


def refund_tool(strict: bool = True, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "create_refund",
            "description": "Refund part or all of an order.",
            "strict": strict,
            "parameters": copy.deepcopy(schema or REFUND_SCHEMA),
        },
    }


def lookup_tool() -> dict[str, Any]:
    """A non-strict tool whose schema would fail the strict lint."""
    return {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}}},
        },
    }


@dataclass
class Result:
    completion: ChatCompletion
    headers: httpx.Headers | Any  # the SDK may vendor its own httpx


def calls_of(completion: ChatCompletion) -> list[ChatCompletionMessageFunctionToolCall]:
    """The function tool calls of the first choice (empty if none)."""
    return [
        c
        for c in completion.choices[0].message.tool_calls or ()
        if isinstance(c, ChatCompletionMessageFunctionToolCall)
    ]


Chat = Callable[..., Result]


def make_chat(kind: str, base_url: str, api_key: str) -> Chat:
    """``chat(**create_kwargs) -> Result`` through the sync or async SDK (no retries)."""

    def call(**kw: Any) -> Result:
        kw.setdefault("model", "strict-model")
        kw.setdefault("messages", MESSAGES)
        if kind == "sync":
            with openai.OpenAI(
                base_url=base_url, api_key=api_key, max_retries=0, timeout=20
            ) as client:
                raw = client.chat.completions.with_raw_response.create(**kw)
                return Result(raw.parse(), raw.headers)

        async def run() -> Result:
            async with openai.AsyncOpenAI(
                base_url=base_url, api_key=api_key, max_retries=0, timeout=20
            ) as client:
                raw = await client.chat.completions.with_raw_response.create(**kw)
                return Result(raw.parse(), raw.headers)

        return asyncio.run(run())

    return call


def envelope(exc: openai.APIStatusError) -> dict[str, Any]:
    body: dict[str, Any] = exc.response.json()
    return body
