"""Where a request came from: the client's wire, its parsed body and its vendor headers.

The canonical request models what the gateway owns (messages, tools, strictness, limits);
``Origin`` keeps the rest as the client sent it, so an upstream that speaks the client's
own wire gets the client's body back with only the owned parts replaced
(``gateway.upstream.same_wire``), and any other upstream gets what the field policy
(``gateway.dialects.policy``) carries over, drops or refuses (one ``Screen`` per kind of
upstream).

Example::

    origin = Origin("messages", body, headers=(("anthropic-beta", "x"),), messages=2)
    origin.screen("chat").dropped  # e.g. ('cache_control', 'anthropic-beta')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal

from gateway.canonical.record import record

# A client dialect's wire, which is also an upstream's: chat completions, Responses, Messages.
Wire = Literal["chat", "responses", "messages"]
# The kinds of upstream the field policy rules for: the three wires and the local model.
Target = Literal["chat", "responses", "messages", "local"]
# A request header name (lower case) and its value as received.
Header = tuple[str, str]


@record
class Screen:
    """The field policy's verdict on one request for one kind of upstream.

    ``refused``: ``(param, message)`` of fields that upstream cannot take without changing
    the answer's contract (the first is a 400). ``dropped``: names for
    ``x-syntic-dropped``. ``carried``: ``(dotted path, value)`` the cross-wire codec adds to
    its body (a field forwarded under its own name, or translated to the target's)."""

    refused: tuple[tuple[str, str], ...] = ()
    dropped: tuple[str, ...] = ()
    carried: tuple[tuple[str, Any], ...] = ()


NO_SCREEN = Screen()


@record
class Origin:
    """The client's request as it came: ``wire``, the parsed ``body`` (a Responses body
    with its stored history already inlined), vendor ``headers`` (``anthropic-beta``,
    ``anthropic-version``, ``openai-beta``).

    ``messages``: how many canonical messages the body accounts for (the enforcement loop
    appends its correction turns after them); ``tool_names``: tools the body carries
    that the canonical request does not model (an Anthropic-defined ``bash`` tool), which
    the model may still call by name; ``tool_paths``: where each canonical tool is in the
    body (``tools[3]``, ``tools[2].tools[0]``) when that is not ``tools[i]``, for the
    ``param`` of an error; ``screens``: the policy's verdict per ``Target``; ``tools``: the
    canonical tools as decoded, each from ``tools[i]`` of the body, when the decoder vouches
    that a tool the request still has goes back as sent (chat completions), so the
    same-wire body patches only the tools changed since (empty: every tool is checked)."""

    wire: Wire
    body: Mapping[str, Any]
    headers: tuple[Header, ...] = ()
    messages: int = 0
    tool_names: tuple[str, ...] = ()
    tool_paths: tuple[str, ...] = ()
    screens: Mapping[str, Screen] = field(default_factory=dict)
    tools: tuple[object, ...] = ()  # the ToolSpecs, compared by identity only
    # The body's list members as encoded when it was parsed (``gateway.bounds.Members``:
    # key -> (value, bytes)), reused by a same-wire body that still holds that very value.
    encoded: Mapping[str, tuple[Any, memoryview]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def screen(self, target: Target) -> Screen:
        return self.screens.get(target, NO_SCREEN)

    def tool_param(self, i: int, param: str) -> str:
        """``param`` (spelled from ``tools[i]``) at canonical tool ``i``'s place in the body."""
        prefix = f"tools[{i}]"
        if not self.tool_paths or not param.startswith(prefix):
            return param
        return self.tool_paths[i] + param[len(prefix) :]

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None
