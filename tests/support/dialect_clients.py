"""One request in each client dialect through its official SDK, with every 200 body and
every stream event validated against the SDK's own response types.

    seen = ask(gw, "chat", "oa", stream=True, extra={...})
    seen.raw        # the body (or the list of stream events), as JSON, each validated
    seen.final      # the SDK's object: ChatCompletion, Response, Message (stream helpers'
                    # final objects for a stream)
    seen.headers    # the response's headers (the raw request's, for a stream)

A streamed request is made twice (queue two upstream steps): once raw, each event
validated (``ChatCompletionChunk``, ``ResponseStreamEvent``, ``RawMessageStreamEvent``), and
once through the SDK's stream helper for its final object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import anthropic
import openai
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.support.gateway_proc import GatewayProcess

Dialect = Literal["chat", "responses", "messages"]
DIALECTS: tuple[Dialect, ...] = ("chat", "responses", "messages")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
PROMPT = "Tell me something."

_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
_MESSAGE_EVENTS: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)


@dataclass
class Seen:
    raw: Any
    final: Any
    events: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


def strict_output(dialect: Dialect) -> dict[str, Any]:
    """The request field asking for strict JSON output, in ``dialect``'s spelling."""
    if dialect == "chat":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
            }
        }
    if dialect == "responses":
        return {
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "answer",
                    "schema": SCHEMA,
                    "strict": True,
                }
            }
        }
    return {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}


def _data_lines(lines: list[str]) -> list[dict[str, Any]]:
    import json

    out = []
    for line in lines:
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload != "[DONE]":
                out.append(json.loads(payload))
    return out


def _chat(gw: GatewayProcess, model: str, stream: bool, extra: dict[str, Any]) -> Seen:
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20
    ) as client:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            **extra,
        }
        if not stream:
            reply = client.chat.completions.with_raw_response.create(**body)
            raw = reply.http_response.json()
            return Seen(raw, ChatCompletion.model_validate(raw), headers=dict(reply.headers))
        with client.chat.completions.with_streaming_response.create(
            **body, stream=True, stream_options={"include_usage": True}
        ) as r:
            events = _data_lines(list(r.iter_lines()))
            headers = dict(r.headers)
        for event in events:
            ChatCompletionChunk.model_validate(event)
        with client.chat.completions.stream(**body) as s:
            for _ in s:
                pass
            final = s.get_final_completion()
        return Seen(events, final, events, headers)


def _responses(gw: GatewayProcess, model: str, stream: bool, extra: dict[str, Any]) -> Seen:
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20
    ) as client:
        body: dict[str, Any] = {"model": model, "input": PROMPT, "store": False, **extra}
        if not stream:
            reply = client.responses.with_raw_response.create(**body)
            raw = reply.http_response.json()
            return Seen(raw, Response.model_validate(raw), headers=dict(reply.headers))
        with client.responses.with_streaming_response.create(**body, stream=True) as r:
            events = _data_lines(list(r.iter_lines()))
            headers = dict(r.headers)
        for event in events:
            _EVENTS.validate_python(event)
        with client.responses.stream(**body) as s:
            for _ in s:
                pass
            final = s.get_final_response()
        return Seen(events, final, events, headers)


def _messages(gw: GatewayProcess, model: str, stream: bool, extra: dict[str, Any]) -> Seen:
    with anthropic.Anthropic(
        base_url=gw.base_url, api_key=gw.api_key, max_retries=0, timeout=20
    ) as client:
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": 256,
            "messages": [{"role": "user", "content": PROMPT}],
            **extra,
        }
        if not stream:
            reply = client.messages.with_raw_response.create(**body)
            raw = reply.http_response.json()
            return Seen(raw, Message.model_validate(raw), headers=dict(reply.headers))
        with client.messages.with_streaming_response.create(**body, stream=True) as r:
            events = [e for e in _data_lines(list(r.iter_lines())) if e["type"] != "ping"]
            headers = dict(r.headers)
        for event in events:
            _MESSAGE_EVENTS.validate_python(event)
        with client.messages.stream(**body) as s:
            for _ in s:
                pass
            final = s.get_final_message()
        return Seen(events, final, events, headers)


def ask(
    gw: GatewayProcess,
    dialect: Dialect,
    model: str,
    *,
    stream: bool,
    extra: dict[str, Any] | None = None,
) -> Seen:
    """One request (two when streamed, see the module docstring)."""
    run = {"chat": _chat, "responses": _responses, "messages": _messages}[dialect]
    return run(gw, model, stream, dict(extra or {}))
