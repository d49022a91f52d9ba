"""Canonical ``ChatResponse`` -> chat-completions response JSON (``chat.completion``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.canonical import (
    DEFAULT_REFUSAL,
    ChatResponse,
    Citation,
    Logprobs,
    Passthrough,
    ToolCall,
    Usage,
    WireItem,
    overlaid,
)


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
    choices = []
    for i, response in enumerate(responses):  # a loop, not a comprehension: no frame of its own
        choices.append(
            {
                "index": i,
                "message": _message(response),
                "finish_reason": response.finish_reason,
                "logprobs": None if response.logprobs is None else logprobs_json(response.logprobs),
            }
        )
    body: dict[str, Any] = {
        "id": first.id or "chatcmpl-" + request_id.removeprefix("req_"),
        "object": "chat.completion",
        "created": first.created,
        "model": model,
        "choices": choices,
        "usage": encode_usage(usage, schema_retries),
        "system_fingerprint": None,
    }
    if first.passthrough is not None:  # nothing to add without one
        body.update(top_fields(first.passthrough))
    return body


def top_fields(passthrough: Passthrough | None) -> dict[str, Any]:
    """The answer's ``service_tier`` (from either OpenAI wire), and a chat upstream's
    other top-level members (``system_fingerprint``, ``moderation``...), as sent."""
    if passthrough is None:
        return {}
    if passthrough.wire == "openai":
        return dict(passthrough.response)
    out: dict[str, Any] = {}
    if passthrough.service_tier is not None:
        out["service_tier"] = passthrough.service_tier
    return out


def logprobs_json(logprobs: Logprobs | None) -> dict[str, Any] | None:
    """A choice's ``logprobs``: the content's and the refusal's token lists."""
    if logprobs is None:
        return None
    return {
        "content": list(logprobs.content) if logprobs.content is not None else None,
        "refusal": list(logprobs.refusal) if logprobs.refusal is not None else None,
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
    if usage.kept is not None and usage.kept.wire == "openai":
        overlaid(out, usage.kept.fields)  # audio_tokens, prediction tokens: as sent
    return out


def url_citation(citation: Citation) -> dict[str, Any]:
    """A web citation of another wire as a chat ``url_citation`` annotation (indexes into
    the message's content)."""
    url, title = citation.link or ("", "")
    return {
        "type": "url_citation",
        "url_citation": {
            "start_index": citation.start,
            "end_index": citation.end,
            "url": url,
            "title": title,
        },
    }


def _message(response: ChatResponse) -> dict[str, Any]:
    refusal = response.refusal
    message: dict[str, Any] = {
        "role": "assistant",
        "content": response.content,
        "refusal": None if refusal is None else refusal_text(refusal),
    }
    extra = response.passthrough
    if extra is not None and extra.wire == "openai" and extra.message:
        # annotations, audio, reasoning_content...: the upstream's, same wire
        message.update((k, v) for k, v in extra.message.items() if k not in message)
    cited = (
        [url_citation(c) for c in response.citations if c.wire != "openai" and c.link]
        if response.citations
        else None
    )
    if cited:  # another wire's web citations, as chat spells them
        message["annotations"] = [*message.get("annotations", ()), *cited]
    if response.tool_calls or response.items:
        if not response.layout:  # the default order: parts() gives the function calls alone
            calls = [_function_call(c) for c in response.tool_calls]
        else:
            # Custom tools' calls from a chat upstream, as sent, in their place among the calls.
            calls = [
                _function_call(p) if isinstance(p, ToolCall) else p.raw
                for p in response.parts()
                if isinstance(p, ToolCall) or (isinstance(p, WireItem) and p.wire == "openai")
            ]
        if calls:
            message["tool_calls"] = calls
    return message


def _function_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.raw_arguments},
    }
