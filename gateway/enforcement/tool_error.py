"""The opt-in ``on_invalid = "tool_error"`` mode (per model, or ``x-syntic-on-invalid``).

A strict call still invalid after its one correction, or a call ``tool_choice`` requires
still missing, is not the request's 422 but words in a 200 answer: the call is dropped
(its arguments are never returned) and a text part names the tool and what was wrong, in
the dropped call's place. An answer left with no call ends as a plain text turn
(``stop``); the other calls of a parallel answer stay. An agent shows the text (and its
model reads it on the next turn) instead of stopping on an HTTP error. A strict output's
failure stays a 422: its answer must be the JSON it asked for.

The response names what happened in ``x-syntic-on-invalid`` (``Tally.tool_errors``)::

    x-syntic-on-invalid: tool_error; dropped=read_file
    x-syntic-on-invalid: tool_error; missing=create_refund      (``*``: any tool)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from gateway.canonical import ChatResponse, Slot, ToolCall, Usage

__all__ = ["TOOL_CODES", "answer_with_errors", "explanation"]

# The refusals this mode turns into words: a call's, not a strict output's.
TOOL_CODES = frozenset({"tool_arguments_invalid", "tool_call_missing"})


def explanation(tool: str | None, code: str, message: str, details: Sequence[str]) -> str:
    """What the answer says instead of the call: the tool, the error code and message, and
    each violation the message does not already name (never the arguments themselves)."""
    if code == "tool_call_missing":
        return f"The gateway found no tool call ({code}): {message}"
    head = f"The gateway dropped a call to {tool} ({code}): {message}"
    return "\n".join([head, *(f"- {d}" for d in details if d and d not in message)])


def answer_with_errors(
    response: ChatResponse,
    calls: tuple[ToolCall, ...],
    dropped: Collection[int],
    texts: Sequence[str],
    usage: Usage,
) -> ChatResponse:
    """``response`` with ``calls`` (the kept ones; ``dropped``: the indices removed from
    ``response.tool_calls``) and the ``texts`` after its own text; ``stop`` when no call is
    left."""
    said = "\n\n".join(texts)
    content = f"{response.content}\n\n{said}" if response.content else said
    layout = _without(response.layout, dropped) if response.layout and dropped else response.layout
    calls_left = bool(calls) or any(i.client_call for i in response.items)
    return dataclasses.replace(
        response,
        content=content,
        tool_calls=calls,
        layout=layout,
        usage=usage,
        finish_reason=response.finish_reason if calls_left else "stop",
    )


def _without(layout: tuple[Slot, ...], dropped: Collection[int]) -> tuple[Slot, ...]:
    """The layout with the dropped calls' places taken out, later calls renumbered."""
    out: list[Slot] = []
    for kind, n in layout:
        if kind != "call":
            out.append((kind, n))
        elif n not in dropped:
            out.append((kind, n - sum(1 for d in dropped if d < n)))
    return tuple(out)
