"""Tool-call text parsing for the local provider (pure; no model needed)."""

from __future__ import annotations

import json

import pytest

from gateway.upstream.local.parse import ParsedCall, ParsedTurn, parse_output

TOOLS = {"create_refund", "lookup"}

CASES: list[tuple[str, str, ParsedTurn]] = [
    (
        "qwen tagged block",
        '<tool_call>\n{"name": "lookup", "arguments": {"q": "a b"}}\n</tool_call>',
        ParsedTurn(None, (ParsedCall("lookup", '{"q": "a b"}'),)),
    ),
    (
        "two tagged blocks with text around",
        'Sure.\n<tool_call>\n{"name": "lookup", "arguments": {"q": 1}}\n</tool_call>\n'
        '<tool_call>\n{"arguments": {"x": [1, {"arguments": 2}]}, "name": "create_refund"}'
        "\n</tool_call>",
        ParsedTurn(
            "Sure.",
            (
                ParsedCall("lookup", '{"q": 1}'),
                ParsedCall("create_refund", '{"x": [1, {"arguments": 2}]}'),
            ),
        ),
    ),
    (
        "broken JSON kept verbatim",
        '<tool_call>\n{"name": "create_refund", "arguments": {"amount": 12.5, "reason": }}\n'
        "</tool_call>",
        ParsedTurn(None, (ParsedCall("create_refund", '{"amount": 12.5, "reason": }'),)),
    ),
    (
        "truncated: no closing tag",
        '<tool_call>\n{"name": "lookup", "arguments": {"q": "abc',
        ParsedTurn(None, (ParsedCall("lookup", '{"q": "abc'),)),
    ),
    (
        "unknown tool name in a tag still a call",
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        ParsedTurn(None, (ParsedCall("nope", "{}"),)),
    ),
    (
        "arguments as a JSON string",
        '<tool_call>{"name": "lookup", "arguments": "{\\"q\\": 2}"}</tool_call>',
        ParsedTurn(None, (ParsedCall("lookup", '{"q": 2}'),)),
    ),
    (
        "bare JSON object naming a tool",
        ' {"name": "lookup", "arguments": {"q": "z"}} ',
        ParsedTurn(None, (ParsedCall("lookup", '{"q": "z"}'),)),
    ),
    (
        "fenced JSON with prose",
        'Calling it:\n```json\n{"name": "lookup", "parameters": {"q": 3}}\n```',
        ParsedTurn("Calling it:", (ParsedCall("lookup", '{"q": 3}'),)),
    ),
    (
        "list of calls",
        '[{"name": "lookup", "arguments": {}}, {"name": "create_refund", "arguments": {"a": 1}}]',
        ParsedTurn(None, (ParsedCall("lookup", "{}"), ParsedCall("create_refund", '{"a": 1}'))),
    ),
    (
        "JSON content that is not a call stays content",
        '{"name": "Alice", "age": 3}',
        ParsedTurn('{"name": "Alice", "age": 3}', ()),
    ),
    ("plain text", "  Hello there.\n", ParsedTurn("Hello there.", ())),
    ("empty", "", ParsedTurn(None, ())),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_output(text: str, expected: ParsedTurn) -> None:
    assert parse_output(text, TOOLS) == expected


def test_bare_json_is_content_without_tools() -> None:
    text = '{"name": "lookup", "arguments": {}}'
    assert parse_output(text, ()) == ParsedTurn(text, ())


def test_verbatim_spacing_kept() -> None:
    args = '{ "q" :   "x",\n  "n": 1.50 }'
    turn = parse_output(f'<tool_call>{{"name": "lookup", "arguments": {args}}}</tool_call>', TOOLS)
    assert turn.calls[0].raw_arguments == args
    assert json.loads(turn.calls[0].raw_arguments) == {"q": "x", "n": 1.5}
