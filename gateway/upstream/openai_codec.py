"""Wire codec for chat completions: canonical request -> request body (the adapter,
``gateway.upstream.openai``, sends it and decodes the answer). No I/O here.

What differs between OpenAI-compatible engines (how constrained output is asked for, which
``tool_choice`` values are read, ``content: ""`` for an assistant turn with tool calls
where ``null`` is refused, the token-limit field, usage in streams) comes from the model's
engine profile (``gateway.engines``); the helpers here are shared with the same-wire body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.canonical import (
    ChatRequest,
    ForcedTool,
    ImagePart,
    JsonSchemaFormat,
    Message,
    TextPart,
)
from gateway.engines import ConstrainedField, EngineProfile
from gateway.settings import ModelConfig
from gateway.upstream.carried import carry_over

__all__ = [
    "constrained_output",
    "constrains_output",
    "encode_message",
    "encode_request",
    "engine_tool_choice",
    "plain_output",
    "tokens_field",
]


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


def encode_message(message: Message, *, null_content: bool = True) -> dict[str, Any]:
    """One message; ``null_content=False``: an assistant turn without text says ``""``
    (an engine whose request model types ``content`` as a string refuses ``null``)."""
    out: dict[str, Any] = {"role": message.role}
    content = _content(message)
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        out["content"] = content if content is not None else ""
    elif message.role == "assistant":
        out["content"] = content if content is not None or null_content else ""
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


def constrained_output(fmt: JsonSchemaFormat, field: ConstrainedField) -> dict[str, Any]:
    """The request field(s) that make an engine decode its reply under ``fmt.schema``, as
    each documents it: vLLM's ``structured_outputs`` (which replaced ``guided_json``),
    llama.cpp server's top-level ``json_schema``, llama-cpp-python's ``json_object`` with a
    ``schema``, and the OpenAI ``response_format`` shape that SGLang and OpenAI read."""
    if field == "vllm":
        return {"structured_outputs": {"json": fmt.schema}}
    if field == "llama_cpp":
        return {"json_schema": fmt.schema}
    if field == "llama_cpp_python":
        return {"response_format": {"type": "json_object", "schema": fmt.schema}}
    js: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema}
    if fmt.strict:  # a client's non-strict format stays so (OpenAI would hold it to strict)
        js["strict"] = True
    return {"response_format": {"type": "json_schema", "json_schema": js}}


def constrains_output(model: ModelConfig) -> bool:
    """Whether a schema'd output goes in the engine's constrained form: a constrained
    model whose engine (or field) is named; OpenAI itself gets the client's own form."""
    return model.constrained and (model.engine is not None or model.constrained_field is not None)


def plain_output(fmt: JsonSchemaFormat, profile: EngineProfile) -> dict[str, Any]:
    """A schema'd output the gateway enforces itself: the OpenAI form, or a plain JSON
    object request to an engine that refuses ``json_schema`` (validation does the rest)."""
    if profile.plain_output == "json_object":
        return {"type": "json_object"}
    js: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema}
    if fmt.strict:
        js["strict"] = True
    if fmt.description is not None:
        js["description"] = fmt.description
    return {"type": "json_schema", "json_schema": js}


def engine_tool_choice(
    choice: Any, profile: EngineProfile, tools: Sequence[str]
) -> tuple[Any, tuple[str, ...] | None]:
    """``tool_choice`` as the engine reads it (``None``: not sent) and the tools to keep
    (``None``: all), for a request with ``tools`` (their names): a named choice to an
    engine that reads only strings becomes "required" with only that tool; to one that
    reads no ``tool_choice``, only that tool (and "none", no tools); "required" with one
    tool, that tool named, to an engine that constrains only a named choice."""
    named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    only = (named,) if isinstance(named, str) else None
    if not profile.tool_choice:
        return None, () if choice == "none" else only
    if only is not None and not profile.named_tool_choice:
        return "required", only
    if choice == "required" and profile.required_as_named and len(tools) == 1:
        return {"type": "function", "function": {"name": tools[0]}}, None
    return choice, None


def tokens_field(model: ModelConfig) -> str:
    """Where the token limit goes: the model's field, or ``max_tokens`` for an engine that
    does not read ``max_completion_tokens`` (it would ignore the limit)."""
    return model.max_tokens_field if model.profile.max_completion_tokens else "max_tokens"


def encode_request(request: ChatRequest, model: ModelConfig, *, stream: bool) -> dict[str, Any]:
    """Canonical request -> chat-completions JSON body for ``model.upstream_model``."""
    profile = model.profile
    body: dict[str, Any] = {
        "model": model.upstream_model,
        "messages": [
            encode_message(m, null_content=profile.null_content_with_calls)
            for m in request.messages
        ],
    }
    choice = request.tool_choice
    wire_choice: Any = (
        {"type": "function", "function": {"name": choice.name}}
        if isinstance(choice, ForcedTool)
        else choice
    )
    wire_choice, keep = engine_tool_choice(wire_choice, profile, [t.name for t in request.tools])
    if request.tools and keep != ():
        tools = []
        for t in request.tools:
            if keep is not None and t.name not in keep:
                continue
            fn: dict[str, Any] = {"name": t.name, "parameters": t.parameters}
            if t.description is not None:
                fn["description"] = t.description
            if t.strict:
                fn["strict"] = True
            tools.append({"type": "function", "function": fn})
        body["tools"] = tools
    if wire_choice is not None:
        body["tool_choice"] = wire_choice
    rf = request.response_format
    if isinstance(rf, JsonSchemaFormat) and constrains_output(model):
        body.update(constrained_output(rf, model.output_field))
    elif isinstance(rf, JsonSchemaFormat):
        body["response_format"] = plain_output(rf, profile)
    elif rf is not None:
        body["response_format"] = {"type": rf}
    for key, value in (
        (tokens_field(model), request.max_tokens),
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
        if profile.stream_usage:
            body["stream_options"] = {"include_usage": True}
    return body
