"""Prompt rendering with a chat template (needs jinja2, from the `local` extra)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gateway.canonical import (
    ChatRequest,
    ForcedTool,
    JsonSchemaFormat,
    Message,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from gateway.upstream.local.render import render_prompt

pytest.importorskip("jinja2", reason="jinja2 comes with the local extra: pip install -e '.[local]'")

# A minimal tool-aware template in the Qwen2.5 style.
TOOL_TEMPLATE = (
    "{% if tools %}TOOLS:{% for t in tools %}{{ t | tojson }};{% endfor %}\n{% endif %}"
    "{% for m in messages %}[{{ m.role }}]"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}CALL {{ c.function.name }} "
    "{{ c.function.arguments | tojson }}{% endfor %}{% else %}{{ m.content }}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
)

LOOKUP = ToolSpec(
    name="lookup",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    description="Find <things>",
    strict=True,
)


def _user(text: str) -> Message:
    return Message(role="user", content=(TextPart(text),))


def test_native_tools_and_history() -> None:
    bad = ToolCall(id="call_1", name="lookup", raw_arguments='{"q": 1')
    good = ToolCall(id="call_2", name="lookup", raw_arguments='{"q": "é"}')
    request = ChatRequest(
        model="m",
        messages=(
            _user("hi"),
            Message(role="assistant", tool_calls=(bad,)),
            Message(role="tool", tool_call_id="call_1", content=(TextPart("fix it"),)),
            Message(role="assistant", tool_calls=(good,)),
        ),
        tools=(LOOKUP,),
    )
    prompt = render_prompt(TOOL_TEMPLATE, request)
    tools_line = prompt.text.splitlines()[0]
    # tojson: no HTML escaping, no key sorting, unicode kept.
    assert tools_line.startswith('TOOLS:{"type": "function", "function": {"name": "lookup"')
    assert "Find <things>" in tools_line
    assert 'CALL lookup "{\\"q\\": 1"' in prompt.text  # unparseable args shown as a string
    assert 'CALL lookup {"q": "é"}' in prompt.text
    assert "[tool]fix it" in prompt.text
    assert prompt.prefill == ""
    assert prompt.text.endswith("[assistant]")


@pytest.mark.parametrize(
    ("choice", "prefill"),
    [
        (None, ""),
        ("auto", ""),
        ("required", "<tool_call>\n"),
        (ForcedTool("lookup"), '<tool_call>\n{"name": "lookup", "arguments": '),
    ],
)
def test_tool_choice_prefill(choice: ToolChoice | None, prefill: str) -> None:
    request = ChatRequest(model="m", messages=(_user("x"),), tools=(LOOKUP,), tool_choice=choice)
    prompt = render_prompt(TOOL_TEMPLATE, request)
    assert prompt.prefill == prefill
    assert prompt.text.endswith("[assistant]" + prefill)


def test_open_object_prefill_for_a_forced_call() -> None:
    forced = ChatRequest(
        model="m", messages=(_user("x"),), tools=(LOOKUP,), tool_choice=ForcedTool("lookup")
    )
    required = dataclasses.replace(forced, tool_choice="required")
    assert render_prompt(TOOL_TEMPLATE, forced, open_object=True).prefill.endswith('"arguments": {')
    assert render_prompt(TOOL_TEMPLATE, required, open_object=True).prefill == "<tool_call>\n"


def test_tool_choice_none_hides_tools() -> None:
    request = ChatRequest(model="m", messages=(_user("x"),), tools=(LOOKUP,), tool_choice="none")
    prompt = render_prompt(TOOL_TEMPLATE, request)
    assert "TOOLS" not in prompt.text and prompt.prefill == ""


def test_chatml_fallback_writes_tools_into_system() -> None:
    call = ToolCall(id="c", name="lookup", raw_arguments='{"q": "a"}')
    request = ChatRequest(
        model="m",
        messages=(
            Message(role="system", content=(TextPart("Be brief."),)),
            _user("x"),
            Message(role="assistant", tool_calls=(call,)),
            Message(role="tool", tool_call_id="c", content=(TextPart("42"),)),
        ),
        tools=(LOOKUP,),
    )
    text = render_prompt(None, request).text
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert (
        json.dumps(
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Find <things>",
                    "parameters": LOOKUP.parameters,
                },
            }
        )
        in system
    )
    assert '<tool_call>\n{"name": "lookup", "arguments": {"q": "a"}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_response_format_instruction() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    request = ChatRequest(
        model="m", messages=(_user("x"),), response_format=JsonSchemaFormat(schema=schema)
    )
    text = render_prompt(None, request).text
    assert text.startswith("<|im_start|>system\nRespond with only a JSON value")
    assert json.dumps(schema) in text
