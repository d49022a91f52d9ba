"""Turning a local model's text into content and real tool calls.

Qwen2.5's template asks for ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
blocks; small models also write a bare JSON object or a fenced ```json block. The
arguments are cut out of the model's text verbatim (``raw_arguments``), even when they are
not valid JSON: the gateway's validator then corrects or refuses them (spec: arguments that
do not match are never returned, but what the model sent is kept for the error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"

_ARGS_KEY = re.compile(r'"(?:arguments|parameters)"\s*:\s*')
_NAME_KEY = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call found in the text: its name and its arguments text, verbatim."""

    name: str
    raw_arguments: str


@dataclass(frozen=True, slots=True)
class ParsedTurn:
    """The assistant turn split into free text (``None`` when empty) and tool calls."""

    content: str | None
    calls: tuple[ParsedCall, ...]


def parse_call_body(body: str) -> ParsedCall | None:
    """``{"name": "f", "arguments": {...}}`` (possibly broken) -> a call, or None when the
    text names no function at all."""
    body = body.strip()
    name_match = _NAME_KEY.search(body)
    try:
        whole = json.loads(body)
    except ValueError:
        whole = None
    name: str | None = None
    if isinstance(whole, dict) and isinstance(whole.get("name"), str):
        name = whole["name"]
    elif name_match is not None:
        try:
            name = json.loads(f'"{name_match.group(1)}"')
        except ValueError:
            name = name_match.group(1)
    if name is None:
        return None
    return ParsedCall(name=name, raw_arguments=_arguments_text(body))


def _arguments_text(body: str) -> str:
    # The first "arguments" key in document order is the top-level one: a nested key of the
    # same name can only appear inside the value, after it.
    match = _ARGS_KEY.search(body)
    if match is None:
        return ""
    start = match.end()
    try:
        value, end = _DECODER.raw_decode(body, start)
    except ValueError:
        # Broken JSON: everything up to the outer object's closing brace, verbatim.
        rest = body[start:].rstrip()
        return rest[:-1].rstrip() if rest.endswith("}") else rest
    if isinstance(value, str):
        return value  # the model wrote the arguments as a JSON string of JSON
    return body[start:end]


def _tagged(text: str) -> ParsedTurn | None:
    if OPEN_TAG not in text:
        return None
    calls: list[ParsedCall] = []
    outside: list[str] = []
    pos = 0
    while True:
        open_at = text.find(OPEN_TAG, pos)
        if open_at < 0:
            outside.append(text[pos:])
            break
        outside.append(text[pos:open_at])
        body_start = open_at + len(OPEN_TAG)
        close_at = text.find(CLOSE_TAG, body_start)
        body = text[body_start:] if close_at < 0 else text[body_start:close_at]
        call = parse_call_body(body)
        if call is not None:
            calls.append(call)
        else:
            outside.append(body)
        if close_at < 0:
            break
        pos = close_at + len(CLOSE_TAG)
    content = "".join(outside).strip()
    return ParsedTurn(content or None, tuple(calls))


def _json_calls(candidate: str, tool_names: Collection[str]) -> list[ParsedCall] | None:
    candidate = candidate.strip()
    if not candidate.startswith(("{", "[")):
        return None
    try:
        value = json.loads(candidate)
    except ValueError:
        value = None
    if isinstance(value, list):
        bodies = [json.dumps(v) for v in value if isinstance(v, dict)]
        if not bodies or len(bodies) != len(value):
            return None
        calls = [parse_call_body(b) for b in bodies]
        found = [c for c in calls if c is not None]
        ok = len(found) == len(calls) and all(c.name in tool_names for c in found)
        return found if ok else None
    call = parse_call_body(candidate)
    if call is None or call.name not in tool_names:
        return None
    return [call]


def parse_output(text: str, tool_names: Collection[str]) -> ParsedTurn:
    """Split a completion into content and tool calls.

    Tagged blocks always count as calls (an unknown name is the gateway's to reject). A bare
    or fenced JSON object counts only when ``tool_names`` is non-empty and it names one of
    them, so JSON answers to ``response_format`` stay content.

    >>> parse_output('<tool_call>\\n{"name": "f", "arguments": {"a": 1}}\\n</tool_call>', {"f"})
    ParsedTurn(content=None, calls=(ParsedCall(name='f', raw_arguments='{"a": 1}'),))
    """
    tagged = _tagged(text)
    if tagged is not None:
        return tagged
    if tool_names:
        whole = _json_calls(text, tool_names)
        if whole is not None:
            return ParsedTurn(None, tuple(whole))
        fences = list(_FENCE.finditer(text))
        fenced_calls: list[ParsedCall] = []
        rest = text
        for fence in fences:
            calls = _json_calls(fence.group(1), tool_names)
            if calls is not None:
                fenced_calls.extend(calls)
                rest = rest.replace(fence.group(0), "", 1)
        if fenced_calls:
            return ParsedTurn(rest.strip() or None, tuple(fenced_calls))
    stripped = text.strip()
    return ParsedTurn(stripped or None, ())
