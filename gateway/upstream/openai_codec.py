"""Wire codec for chat completions: canonical request -> request body (the adapter,
``gateway.upstream.openai``, sends it and decodes the answer). No I/O here.
"""

from __future__ import annotations

from typing import Any

from gateway.canonical import (
    ChatRequest,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    Message,
    TextPart,
)
from gateway.settings import ConstrainedField, ModelConfig
from gateway.upstream.carried import carry_over

__all__ = ["constrained_output", "encode_message", "encode_request"]


def _content(message: Message) -> str | list[dict[str, Any]] | None:
    parts = message.content
    if not parts:
        return None
    if all(isinstance(p, TextPart) for p in parts):
        return message.text
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            url = p.url or f"data:{p.media_type or 'image/png'};base64,{p.data or ''}"
            image = {"url": url} if p.detail is None else {"url": url, "detail": p.detail}
            out.append({"type": "image_url", "image_url": image})
    return out


def encode_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    content = _content(message)
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        out["content"] = content if content is not None else ""
    elif message.role == "assistant":
        out["content"] = content
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.raw_arguments},
                }
                for c in message.tool_calls
            ]
    else:
        out["content"] = content if content is not None else ""
    if message.name is not None:
        out["name"] = message.name
    return out


def constrained_output(fmt: JsonSchemaFormat, engine: ConstrainedField) -> dict[str, Any]:
    """The request field(s) that make ``engine`` decode its reply under ``fmt.schema``, as
    each documents it: vLLM's ``structured_outputs`` (which replaced ``guided_json``),
    llama.cpp server's top-level ``json_schema``, and the OpenAI ``response_format`` shape
    that SGLang and OpenAI read."""
    if engine == "vllm":
        return {"structured_outputs": {"json": fmt.schema}}
    if engine == "llama_cpp":
        return {"json_schema": fmt.schema}
    js = {"name": fmt.name, "schema": fmt.schema, "strict": True}
    return {"response_format": {"type": "json_schema", "json_schema": js}}


def encode_request(request: ChatRequest, model: ModelConfig, *, stream: bool) -> dict[str, Any]:
    """Canonical request -> chat-completions JSON body for ``model.upstream_model``."""
    body: dict[str, Any] = {
        "model": model.upstream_model,
        "messages": [encode_message(m) for m in request.messages],
    }
    if request.tools:
        tools = []
        for t in request.tools:
            fn: dict[str, Any] = {"name": t.name, "parameters": t.parameters}
            if t.description is not None:
                fn["description"] = t.description
            if t.strict:
                fn["strict"] = True
            tools.append({"type": "function", "function": fn})
        body["tools"] = tools
    choice = request.tool_choice
    if isinstance(choice, ForcedTool):
        body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
    elif choice is not None:
        body["tool_choice"] = choice
    rf = request.response_format
    if isinstance(rf, JsonSchemaFormat) and model.constrained and model.constrained_field:
        body.update(constrained_output(rf, model.constrained_field))
    elif isinstance(rf, JsonSchemaFormat):
        js: dict[str, Any] = {"name": rf.name, "schema": rf.schema}
        if rf.strict:
            js["strict"] = True
        if rf.description is not None:
            js["description"] = rf.description
        body["response_format"] = {"type": "json_schema", "json_schema": js}
    elif rf is not None:
        body["response_format"] = {"type": rf}
    for key, value in (
        (model.max_tokens_field, request.max_tokens),
        ("temperature", request.temperature),
        ("top_p", request.top_p),
        ("parallel_tool_calls", request.parallel_tool_calls),
        ("user", request.user),
    ):
        if value is not None:
            body[key] = value
    if request.stop:
        body["stop"] = list(request.stop)
    carry_over(body, request, "chat")
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body
