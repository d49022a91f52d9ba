"""Canonical response -> the Responses API ``response`` object.

    {"id": "resp_..", "object": "response", "created_at": 1733000000, "status": "completed",
     "model": "amara-s1.2", "output": [
        {"type": "message", "id": "msg_..", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "..", "annotations": [], "logprobs": []}]},
        {"type": "function_call", "id": "fc_..", "call_id": "call_..", "name": "..",
         "arguments": "{..}", "status": "completed"}],
     "usage": {"input_tokens": .., "output_tokens": .., "total_tokens": ..,
               "input_tokens_details": {..}, "output_tokens_details": {..},
               "schema_retries": 0},
     "tools": [..], "tool_choice": "auto", "text": {"format": {"type": "text"}}, ...}

The request's settings are echoed as the API does (``tools`` with ``strict`` filled in,
``tool_choice``, ``text``, ``metadata``, ``store``, ``previous_response_id``...).
``usage`` sums every upstream call and gains ``schema_retries``. A ``length`` or
``content_filter`` finish is ``status: "incomplete"`` with ``incomplete_details``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.canonical import (
    DEFAULT_REFUSAL,
    ChatResponse,
    Citation,
    FinishReason,
    ForcedTool,
    JsonSchemaFormat,
    Reasoning,
    TokenLogprob,
    ToolCall,
    ToolSpec,
    Usage,
    overlaid,
    place_citations,
)
from gateway.dialects.responses.decode import ResponsesRequest

__all__ = [
    "ResponseShape",
    "annotation",
    "encode_usage",
    "function_call_item",
    "message_item",
    "refusal_part",
    "response_id",
]

_INCOMPLETE: dict[FinishReason, str] = {
    "length": "max_output_tokens",
    "content_filter": "content_filter",
}


def response_id(request_id: str) -> str:
    """``resp_`` + the request id's digits: unique as request ids are, and traceable."""
    return "resp_" + request_id.removeprefix("req_")


def encode_usage(usage: Usage, schema_retries: int) -> dict[str, Any]:
    """``usage`` as ``openai.types.responses.ResponseUsage`` (``input_tokens`` counts the
    cached ones too), plus ``schema_retries``, and ``estimated: true`` when the gateway
    estimated it (the upstream reported none)."""
    out: dict[str, Any] = {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_creation_tokens,
        },
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
        "schema_retries": schema_retries,
    }
    if usage.estimated:
        out["estimated"] = True
    if usage.kept is not None and usage.kept.wire == "responses":
        overlaid(out, usage.kept.fields)  # cache_write_tokens_details...: as sent
    return out


def output_text(
    text: str,
    logprobs: tuple[TokenLogprob, ...] | None = None,
    annotations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "type": "output_text",
        "text": text,
        "annotations": annotations or [],
        "logprobs": list(logprobs) if logprobs else [],
    }


_POINTS = (("start_index", "start"), ("end_index", "end"), ("index", "start"))


def annotation(citation: Citation, at: int) -> dict[str, Any] | None:
    """The ``output_text`` annotation for ``citation`` in a part starting at character
    ``at`` of the answer's text: a Responses upstream's as sent (its indexes counted from
    this part), another wire's web citation as a ``url_citation``; None for what this
    wire cannot say."""
    if citation.wire == "responses":
        note = dict(citation.raw)
        for key, side in _POINTS:
            if type(note.get(key)) is int:
                note[key] = getattr(citation, side) - at
        return note
    link = citation.link
    if link is None:
        return None
    return {
        "type": "url_citation",
        "start_index": citation.start - at,
        "end_index": citation.end - at,
        "url": link[0],
        "title": link[1],
    }


def refusal_part(refusal: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": refusal}


def message_item(
    item_id: str,
    text: str | None,
    status: str = "completed",
    refusal: str | None = None,
    logprobs: tuple[TokenLogprob, ...] | None = None,
    annotations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A message item: its ``output_text`` part (when ``text`` is not None), then its
    ``refusal`` part (when ``refusal`` is not None); no parts while ``in_progress``."""
    content: list[dict[str, Any]] = []
    if status != "in_progress":
        if text is not None:
            content.append(output_text(text, logprobs, annotations))
        if refusal is not None:
            content.append(refusal_part(refusal))
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": content,
    }


def function_call_item(
    item_id: str, call: ToolCall, status: str = "completed", namespace: str | None = None
) -> dict[str, Any]:
    """A function call item; ``namespace`` (the call's own, else the request's for that
    tool) when its tool is inside a namespace tool; a Responses upstream's other members
    of the call (``caller``) as sent."""
    item: dict[str, Any] = {
        "type": "function_call",
        "id": item_id,
        "call_id": call.id,
        "name": call.name,
        "arguments": call.raw_arguments,
        "status": status,
    }
    if namespace is not None:
        item["namespace"] = namespace
    if call.members is not None and call.members.wire == "responses":
        item.update((k, v) for k, v in call.members.fields.items() if k not in item)
    return item


def _split_tokens(
    tokens: tuple[TokenLogprob, ...], sizes: list[int]
) -> list[tuple[TokenLogprob, ...]]:
    """``tokens`` shared among text segments of ``sizes`` characters, in order (a token
    goes with the segment its text starts in)."""
    out: list[tuple[TokenLogprob, ...]] = []
    at = 0
    for n, size in enumerate(sizes):
        taken: list[TokenLogprob] = []
        used = 0
        while at < len(tokens) and (used < size or n == len(sizes) - 1):
            taken.append(tokens[at])
            used += len(str(tokens[at].get("token") or ""))
            at += 1
        out.append(tuple(taken))
    return out


def status_of(reason: FinishReason) -> tuple[str, dict[str, str] | None]:
    """``(status, incomplete_details)`` for how the turn ended."""
    incomplete = _INCOMPLETE.get(reason)
    if incomplete is None:
        return "completed", None
    return "incomplete", {"reason": incomplete}


class ResponseShape:
    """The ``response`` object of one request: its echo of the request, built once; the
    output, status and usage filled in per call (the streaming events reuse it)."""

    __slots__ = ("_echo", "_namespaces", "_next_item", "id")

    def __init__(self, request: ResponsesRequest, *, response_id: str, created_at: int) -> None:
        self.id = response_id
        self._next_item = 0
        self._namespaces = dict(request.namespaces)
        self._echo: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": created_at,
            "background": False,
            "instructions": request.instructions,
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": None,
            "metadata": request.metadata,
            "model": request.model,
            "parallel_tool_calls": request.parallel_tool_calls is not False,
            "previous_response_id": request.previous_response_id,
            "reasoning": {"effort": request.reasoning_effort, "summary": None},
            "store": request.store,
            "temperature": request.temperature,
            "text": _text(request),
            "tool_choice": _tool_choice(request),
            "tools": [_tool(t) for t in request.tools],
            "top_logprobs": 0,
            "top_p": request.top_p,
            "truncation": "disabled",
            "user": request.user,
        }

    def namespace(self, name: str, namespace: str | None) -> str | None:
        """The namespace a call to ``name`` names: the upstream's, else the one the request
        put the tool in (an upstream of another wire got the tools flattened)."""
        return namespace if namespace is not None else self._namespaces.get(name)

    def item_id(self, prefix: str) -> str:
        """A fresh output item id: ``msg_..`` / ``fc_..`` + this response's digits + a count."""
        n = self._next_item
        self._next_item += 1
        return f"{prefix}_{self.id.removeprefix('resp_')}{n:04x}"

    def body(
        self,
        *,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None,
        incomplete_details: dict[str, str] | None = None,
        error: dict[str, Any] | None = None,
        completed_at: int | None = None,
        service_tier: Any = None,
        kept: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ``response`` object; ``kept``: a Responses upstream's own top-level members
        (its ``service_tier``, the settings it echoes), over the gateway's echo."""
        body = dict(self._echo)
        if kept:
            body.update(kept)
        if service_tier is not None:  # the tier the upstream served the request on
            body["service_tier"] = service_tier
        body["status"] = status
        body["output"] = output
        body["usage"] = usage
        body["incomplete_details"] = incomplete_details
        body["error"] = error
        body["completed_at"] = completed_at
        return body

    def complete(
        self, response: ChatResponse, *, schema_retries: int, completed_at: int
    ) -> dict[str, Any]:
        """The finished ``response`` object of a non-streaming call: its items in the
        upstream's order (``ChatResponse.parts``)."""
        status, incomplete = status_of(response.finish_reason)
        output: list[dict[str, Any]] = []
        messages: list[dict[str, Any]] = []  # one per text segment
        segments: list[str] = []
        for part in response.parts():
            if isinstance(part, Reasoning):
                # Reasoning items only from a Responses upstream, as sent (id,
                # encrypted_content).
                if part.wire == "responses":
                    output.append(dict(part.raw))
            elif isinstance(part, str):
                messages.append({"id": self.item_id("msg")})
                segments.append(part)
                output.append(messages[-1])
            elif isinstance(part, ToolCall):
                output.append(
                    function_call_item(
                        self.item_id("fc"),
                        part,
                        namespace=self.namespace(part.name, part.namespace),
                    )
                )
            elif part.wire == "responses":  # hosted tools' items, custom calls: as sent
                output.append(dict(part.raw))
        refusal = response.refusal
        if refusal is not None and not messages:
            messages.append({"id": self.item_id("msg")})
            segments.append("")
            at = next(
                (i for i, o in enumerate(output) if o.get("type") != "reasoning"), len(output)
            )
            output.insert(at, messages[-1])
        tokens = response.logprobs.content if response.logprobs else None
        shares = _split_tokens(tokens, [len(t) for t in segments]) if tokens else None
        notes = self._annotations(response, segments)
        kept = response.passthrough
        members = kept.messages if kept is not None and kept.wire == "responses" else ()
        for n, (slot, text) in enumerate(zip(messages, segments, strict=True)):
            last = n == len(messages) - 1
            slot.update(
                message_item(
                    slot["id"],
                    text or None,
                    "completed" if status == "completed" else "incomplete",
                    refusal=(refusal or DEFAULT_REFUSAL) if refusal is not None and last else None,
                    logprobs=shares[n] if shares else None,
                    annotations=notes[n],
                )
            )
            if n < len(members):  # the upstream message's own (phase), as sent
                slot.update((k, v) for k, v in members[n].items() if k not in slot)
        tier = response.passthrough.service_tier if response.passthrough else None
        return self.body(
            kept=kept.response if kept is not None and kept.wire == "responses" else None,
            status=status,
            output=output,
            usage=encode_usage(response.usage, schema_retries),
            incomplete_details=incomplete,
            completed_at=completed_at if status == "completed" else None,
            service_tier=tier,
        )

    @staticmethod
    def _annotations(response: ChatResponse, segments: list[str]) -> list[list[dict[str, Any]]]:
        """Each text segment's annotations (``annotation``), in order."""
        if not response.citations:
            return [[] for _ in segments]
        bounds: list[tuple[int, int]] = []
        for text in segments:
            start = bounds[-1][1] if bounds else 0
            bounds.append((start, start + len(text)))
        placed = place_citations(response.citations, bounds)
        return [
            [note for c in cited if (note := annotation(c, start)) is not None]
            for cited, (start, _) in zip(placed, bounds, strict=True)
        ]


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": tool.strict,
    }


def _tool_choice(request: ResponsesRequest) -> Any:
    choice = request.tool_choice
    if isinstance(choice, ForcedTool):
        return {"type": "function", "name": choice.name}
    return choice or "auto"


def _text(request: ResponsesRequest) -> dict[str, Any]:
    fmt = request.text_format
    if isinstance(fmt, JsonSchemaFormat):
        wire: dict[str, Any] = {
            "type": "json_schema",
            "name": fmt.name,
            "schema": fmt.schema,
            "strict": fmt.strict,
            "description": fmt.description,
        }
    else:
        wire = {"type": fmt or "text"}
    return {"format": wire, "verbosity": "medium"}
