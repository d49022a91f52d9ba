"""The scripted upstream's steps rendered in the OpenAI Responses wire format (an upstream
model with ``api = "responses"``), written from the API reference, not from the gateway's
encoder. Plugs into ``ScriptedUpstream``'s renderer table under ``/responses``::

    up.renderers["/responses"] = ResponsesRenderer()

Streamed, text and arguments go out in ``fragment``-character deltas; a ``length`` finish
is ``status: "incomplete"`` with ``incomplete_details.reason = "max_output_tokens"``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from tests.support.scripted_upstream import (
    HttpError,
    ReasoningItem,
    RecordedRequest,
    Reply,
    Tokens,
    pieces,
    placed,
    sse,
)

# Per item type, the progress events the API sends for it (its text after the first), and
# the member its text streams into with that text's event name.
_PROGRESS: dict[str, tuple[str, ...]] = {
    "web_search_call": ("in_progress", "searching", "completed"),
    "file_search_call": ("in_progress", "searching", "completed"),
    "code_interpreter_call": ("in_progress", "interpreting", "completed"),
    "image_generation_call": ("in_progress", "generating", "completed"),
    "mcp_call": ("in_progress", "completed"),
}
_ITEM_TEXT: dict[str, tuple[str, str]] = {
    "custom_tool_call": ("input", "custom_tool_call_input"),
    "code_interpreter_call": ("code", "code_interpreter_call_code"),
    "mcp_call": ("arguments", "mcp_call_arguments"),
}


def reasoning_item(reasoning: ReasoningItem) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": reasoning.id,
        "summary": [{"type": "summary_text", "text": t} for t in reasoning.summary],
    }
    if reasoning.encrypted_content is not None:
        item["encrypted_content"] = reasoning.encrypted_content
    return item


def _status(step: Reply) -> tuple[str, dict[str, str] | None]:
    if step.finish == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    return "completed", None


class ResponsesRenderer:
    """``response`` JSON bodies and Responses SSE streams for scripted ``Reply`` steps."""

    def _items(self, step: Reply, seq: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = [reasoning_item(r) for r in step.reasoning]
        parts: list[dict[str, Any]] = []
        if step.content:
            parts.append({"type": "output_text", "text": step.content, "annotations": []})
        if step.refusal is not None:
            parts.append({"type": "refusal", "refusal": step.refusal})
        if parts:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_up_{seq}",
                    "role": "assistant",
                    "status": "completed",
                    "content": parts,
                }
            )
        items.extend(
            {
                "type": "function_call",
                "id": f"fc_up_{seq}_{i}",
                "call_id": c.id or f"call_up_{seq}_{i}",
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
                **({"namespace": c.namespace} if c.namespace else {}),
            }
            for i, c in enumerate(step.tool_calls)
        )
        return placed(items, step.items)

    def _response(
        self,
        step: Reply,
        request: RecordedRequest,
        seq: int,
        output: list[dict[str, Any]],
        *,
        done: bool,
    ) -> dict[str, Any]:
        prompt, completion = step.usage
        status, incomplete = _status(step) if done else ("in_progress", None)
        d = step.details or Tokens()
        usage = {
            "input_tokens": prompt,
            "input_tokens_details": {
                "cached_tokens": d.cache_read,
                "cache_write_tokens": d.cache_write,
            },
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": d.reasoning},
            "total_tokens": prompt + completion,
        }
        return {
            "id": step.id or f"resp_up_{seq}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": (request.body or {}).get("model", "scripted"),
            "output": output,
            "incomplete_details": incomplete,
            "error": None,
            "usage": usage if done and step.report_usage else None,
            **({"service_tier": step.service_tier} if step.service_tier else {}),
        }

    def render(self, step: Reply, request: RecordedRequest, seq: int) -> bytes:
        return orjson.dumps(self._response(step, request, seq, self._items(step, seq), done=True))

    def render_stream(self, step: Reply, request: RecordedRequest, seq: int) -> list[bytes]:
        n = 0

        def event(kind: str, **data: Any) -> bytes:
            nonlocal n
            out = sse({"type": kind, "sequence_number": n, **data}, event=kind)
            n += 1
            return out

        items = self._items(step, seq)
        started = self._response(step, request, seq, [], done=False)
        events = [event("response.created", response=started)]
        for index, item in enumerate(items):
            if item["type"] == "reasoning":
                empty = {"type": "reasoning", "id": item["id"], "summary": []}
                events.append(event("response.output_item.added", output_index=index, item=empty))
                where = {"item_id": item["id"], "output_index": index}
                for i, part in enumerate(item["summary"]):
                    events.append(
                        event(
                            "response.reasoning_summary_part.added",
                            **where,
                            summary_index=i,
                            part={"type": "summary_text", "text": ""},
                        )
                    )
                    events.extend(
                        event(
                            "response.reasoning_summary_text.delta",
                            **where,
                            summary_index=i,
                            delta=p,
                        )
                        for p in pieces(part["text"], step.fragment)
                    )
                    events.append(
                        event(
                            "response.reasoning_summary_text.done",
                            **where,
                            summary_index=i,
                            text=part["text"],
                        )
                    )
                    events.append(
                        event(
                            "response.reasoning_summary_part.done",
                            **where,
                            summary_index=i,
                            part=part,
                        )
                    )
            elif item["type"] == "message":
                empty = {**item, "status": "in_progress", "content": []}
                events.append(event("response.output_item.added", output_index=index, item=empty))
                for j, part in enumerate(item["content"]):
                    where = {"item_id": item["id"], "output_index": index, "content_index": j}
                    text = part.get("text", part.get("refusal", ""))
                    kind = "output_text" if part["type"] == "output_text" else "refusal"
                    blank = {**part, kind if kind == "refusal" else "text": ""}
                    events.append(event("response.content_part.added", **where, part=blank))
                    if kind == "output_text":
                        events.extend(
                            event("response.output_text.delta", **where, delta=p, logprobs=[])
                            for p in pieces(text, step.fragment)
                        )
                        events.append(
                            event("response.output_text.done", **where, text=text, logprobs=[])
                        )
                    else:
                        events.extend(
                            event("response.refusal.delta", **where, delta=p)
                            for p in pieces(text, step.fragment)
                        )
                        events.append(event("response.refusal.done", **where, refusal=text))
                    events.append(event("response.content_part.done", **where, part=part))
            elif item["type"] != "function_call":
                events.extend(self._item_events(item, index, step.fragment, event))
                continue
            else:
                empty = {**item, "status": "in_progress", "arguments": ""}
                events.append(event("response.output_item.added", output_index=index, item=empty))
                events.extend(
                    event(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=index,
                        delta=p,
                    )
                    for p in pieces(item["arguments"], step.fragment)
                    if p
                )
                events.append(
                    event(
                        "response.function_call_arguments.done",
                        item_id=item["id"],
                        output_index=index,
                        arguments=item["arguments"],
                    )
                )
            events.append(event("response.output_item.done", output_index=index, item=item))
        kind = "response.completed" if _status(step)[0] == "completed" else "response.incomplete"
        events.append(event(kind, response=self._response(step, request, seq, items, done=True)))
        return events

    @staticmethod
    def _item_events(
        item: dict[str, Any], index: int, fragment: int, event: Callable[..., bytes]
    ) -> list[bytes]:
        """A hosted tool's or a custom call's item as the API streams it: added (in
        progress, its text empty), its own progress and text events, done."""
        kind = item["type"]
        where = {"item_id": item["id"], "output_index": index}
        text_key, text_event = _ITEM_TEXT.get(kind, (None, ""))
        empty = dict(item)
        if "status" in item:
            empty["status"] = "in_progress"
        if text_key is not None:
            empty[text_key] = ""
        out = [event("response.output_item.added", output_index=index, item=empty)]
        progress = _PROGRESS.get(kind, ())
        out.extend(event(f"response.{kind}.{step}", **where) for step in progress[:1])
        if text_key is not None:
            text = str(item.get(text_key) or "")
            out.extend(
                event(f"response.{text_event}.delta", **where, delta=p)
                for p in pieces(text, fragment)
                if p
            )
            out.append(event(f"response.{text_event}.done", **where, **{text_key: text}))
        out.extend(event(f"response.{kind}.{step}", **where) for step in progress[1:])
        out.append(event("response.output_item.done", output_index=index, item=item))
        return out

    def refusal(self, request: RecordedRequest) -> bytes | None:
        return None

    def error_body(self, step: HttpError) -> bytes:
        if step.body is not None:
            return step.body if isinstance(step.body, bytes) else orjson.dumps(step.body)
        return orjson.dumps(
            {
                "error": {
                    "message": f"scripted error {step.status}",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        )
