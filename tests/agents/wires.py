"""An agent's upstream request read per wire: its tools, the calls it sends back in its
history, the tool results. Raw wire JSON (what the scripted upstream recorded)."""

from __future__ import annotations

import json
from typing import Any, Literal

Wire = Literal["chat", "responses", "messages"]


def tool_names(wire: Wire, body: Any) -> list[str]:
    return [name for name, _ in _tools(wire, body)]


def tool_schema(wire: Wire, body: Any, name: str) -> dict[str, Any]:
    for tool, schema in _tools(wire, body):
        if tool == name:
            return schema
    raise AssertionError(f"no tool {name!r} in the request: {tool_names(wire, body)}")


def _tools(wire: Wire, body: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for tool in (body or {}).get("tools") or []:
        if wire == "chat" and tool.get("type") == "function":
            out.append((tool["function"]["name"], tool["function"].get("parameters") or {}))
        elif wire == "responses" and tool.get("type") == "function":
            out.append((tool["name"], tool.get("parameters") or {}))
        elif wire == "messages" and "input_schema" in tool:
            out.append((tool["name"], tool["input_schema"]))
    return out


def sent_back_calls(wire: Wire, body: Any) -> list[tuple[str, Any]]:
    """The tool calls in the conversation the agent sent: (name, parsed arguments)."""
    out: list[tuple[str, Any]] = []
    if wire == "responses":
        for item in _list((body or {}).get("input")):
            if item.get("type") == "function_call":
                out.append((item["name"], json.loads(item["arguments"])))
        return out
    for message in _list((body or {}).get("messages")):
        if message.get("role") != "assistant":
            continue
        if wire == "chat":
            for call in message.get("tool_calls") or []:
                out.append((call["function"]["name"], json.loads(call["function"]["arguments"])))
        else:
            for block in _list(message.get("content")):
                if block.get("type") == "tool_use":
                    out.append((block["name"], block["input"]))
    return out


def tool_results(wire: Wire, body: Any) -> list[str]:
    """The text of every tool result in the conversation the agent sent."""
    out: list[str] = []
    if wire == "responses":
        for item in _list((body or {}).get("input")):
            if item.get("type") == "function_call_output":
                out.append(_text(item.get("output")))
        return out
    for message in _list((body or {}).get("messages")):
        if wire == "chat" and message.get("role") == "tool":
            out.append(_text(message.get("content")))
        elif wire == "messages":
            for block in _list(message.get("content")):
                if block.get("type") == "tool_result":
                    out.append(_text(block.get("content")))
    return out


def _list(value: Any) -> list[Any]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "".join(p.get("text", "") for p in _list(value))
