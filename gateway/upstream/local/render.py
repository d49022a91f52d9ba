"""Rendering a canonical request into a prompt with the model's own chat template.

The template is the GGUF's ``tokenizer.chat_template`` (Jinja), rendered in a sandbox the
way Hugging Face does (``tojson`` without HTML escaping or key sorting). Templates that know
about tools (Qwen2.5) get ``tools`` and structured ``tool_calls``; templates that do not
(SmolLM2's plain ChatML) get the same Hermes-style instructions written into the system
message, tool calls as text and tool results as user turns.

``tool_choice`` is honoured by a *prefill*: text appended after the generation prompt that
the model must continue (``<tool_call>\\n`` for "required", plus ``{"name": "f",
"arguments": `` for a forced function). The prefill is part of the model's output for
parsing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gateway.canonical import ChatRequest, ForcedTool, JsonSchemaFormat, Message, ToolSpec
from gateway.upstream.local.parse import CLOSE_TAG, OPEN_TAG

if TYPE_CHECKING:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


class TemplateRenderError(ValueError):
    """The model's chat template failed on this conversation."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """The prompt text to complete, and the prefill (already at its end) that begins the
    model's answer."""

    text: str
    prefill: str


def _dumps(value: Any, indent: int | None = None, **_: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _raise(message: str) -> None:
    raise TemplateRenderError(message)


def _environment() -> ImmutableSandboxedEnvironment:
    # Imported here: jinja2 comes with the optional `local` extra.
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _dumps
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def tool_json(tool: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    return {"type": "function", "function": function}


def _arguments_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # kept as the model wrote it; the template shows it as a JSON string


def _call_text(name: str, raw: str) -> str:
    return f'{OPEN_TAG}\n{{"name": {json.dumps(name)}, "arguments": {raw}}}\n{CLOSE_TAG}'


def _output_instruction(request: ChatRequest) -> str | None:
    fmt = request.response_format
    if isinstance(fmt, JsonSchemaFormat):
        return (
            "Respond with only a JSON value, no prose and no code fences, that matches this "
            f"JSON schema:\n{json.dumps(fmt.schema, ensure_ascii=False)}"
        )
    if fmt == "json_object":
        return "Respond with only a JSON object, no prose and no code fences."
    return None


def _messages(
    request: ChatRequest, *, native_tools: bool, tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    system_extra: list[str] = []
    if tools and not native_tools:
        lines = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
        system_extra.append(_TOOLS_PREAMBLE + lines + _TOOLS_FOOTER)
    instruction = _output_instruction(request)
    if instruction:
        system_extra.append(instruction)
    out: list[dict[str, Any]] = []
    for m in request.messages:
        out.append(_message(m, native_tools=native_tools))
    if system_extra:
        extra = "\n\n".join(system_extra)
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{extra}"}
        else:
            out.insert(0, {"role": "system", "content": extra})
    return out


def _message(m: Message, *, native_tools: bool) -> dict[str, Any]:
    if m.role == "tool":
        if native_tools:
            return {"role": "tool", "content": m.text, "tool_call_id": m.tool_call_id or ""}
        return {"role": "user", "content": f"<tool_response>\n{m.text}\n</tool_response>"}
    if m.role == "assistant" and m.tool_calls:
        if native_tools:
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments_value(c.raw_arguments)},
                }
                for c in m.tool_calls
            ]
            return {"role": "assistant", "content": m.text, "tool_calls": calls}
        text = "\n".join([m.text] if m.text else [])
        blocks = "\n".join(_call_text(c.name, c.raw_arguments) for c in m.tool_calls)
        return {"role": "assistant", "content": f"{text}\n{blocks}".strip()}
    return {"role": m.role, "content": m.text}


def offered_tools(request: ChatRequest) -> tuple[ToolSpec, ...]:
    """The tools the model may call: none when ``tool_choice`` is "none"."""
    return () if request.tool_choice == "none" else request.tools


def prefill_for(request: ChatRequest, *, open_object: bool = False) -> str:
    """The text that starts the answer. ``open_object`` also opens the arguments object
    for a forced call: left at ``"arguments": ``, a small model often writes a bare value
    (``35}``) instead of an object; a grammar needs no such help."""
    choice = request.tool_choice
    if not offered_tools(request):
        return ""
    if isinstance(choice, ForcedTool):
        head = f'{OPEN_TAG}\n{{"name": {json.dumps(choice.name)}, "arguments": '
        return head + "{" if open_object else head
    if choice == "required":
        return f"{OPEN_TAG}\n"
    return ""


def render_prompt(
    template: str | None,
    request: ChatRequest,
    *,
    special: Mapping[str, str] | None = None,
    open_object: bool = False,
) -> Prompt:
    """Render ``request`` with ``template`` (ChatML when the GGUF has none)."""
    source = template or CHATML_TEMPLATE
    native_tools = "tools" in source
    tools = [tool_json(t) for t in offered_tools(request)]
    messages = _messages(request, native_tools=native_tools, tools=tools)
    from jinja2 import TemplateError

    try:
        compiled = _environment().from_string(source)
        text = compiled.render(
            messages=messages,
            tools=tools if (tools and native_tools) else None,
            add_generation_prompt=True,
            **dict(special or {}),
        )
    except (TemplateError, TypeError, KeyError) as exc:
        raise TemplateRenderError(f"chat template failed: {exc}") from exc
    prefill = prefill_for(request, open_object=open_object)
    return Prompt(text=text + prefill, prefill=prefill)
