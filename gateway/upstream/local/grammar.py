"""GBNF grammars for local models: ``constrained = true`` calls and constrained corrections.

Built from the tool's (or ``response_format``'s) JSON Schema with llama.cpp's own converter
(``json_schema_to_gbnf``). The converter cannot express numeric bounds (``minimum``,
``maximum``, ``multipleOf``), ``uniqueItems`` or most ``format``s, so the gateway still
validates what comes back (an engine that fails open must not leak a bad call). A schema the
converter refuses (an unanchored pattern, ``not``, ``if``) degrades to "any JSON object" for
that tool rather than failing the request. docs/local-model.md lists what is expressed.

The grammar continues the prompt's prefill (see ``render.prefill_for``):

- forced tool ``f``: the prefill ends in ``"arguments": ``, so the grammar is f's
  arguments followed by ``}``;
- "required": the prefill ends in ``<tool_call>\\n``, so the grammar is one call object,
  ``{"name": <one of the tools>, "arguments": <its schema>}``;
- "auto": either a tagged call or free text that starts with none of ``<`{[`` or
  whitespace (else the model slips a call into a code fence and past the grammar);
- no tools offered, ``response_format`` json_schema (or json_object): the JSON value.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from gateway.canonical import ChatRequest, ForcedTool, JsonSchemaFormat, ToolSpec
from gateway.upstream.local.parse import CLOSE_TAG, OPEN_TAG
from gateway.upstream.local.render import offered_tools

SchemaToGbnf = Callable[[str, Sequence[str] | None], str]

_ANY_OBJECT: dict[str, Any] = {"type": "object"}


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_GBNF_ESCAPES = frozenset('xuUtrn\\"[]')


def sanitize_gbnf(gbnf: str) -> str:
    """Drop backslashes GBNF does not know (the converter copies regex escapes such as
    ``\\.`` from ``pattern`` into literals, which llama.cpp then refuses to parse)."""
    return _ESCAPE.sub(lambda m: m.group(0) if m.group(1) in _GBNF_ESCAPES else m.group(1), gbnf)


def _literal(text: str) -> str:
    return json.dumps(text)


def _embed(gbnf: str, prefix: str) -> str:
    """Rename every rule of a converted grammar with ``prefix`` so several grammars can be
    combined into one, keeping their internal references intact."""
    names = {line.split(" ::= ", 1)[0] for line in gbnf.splitlines() if " ::= " in line}
    alternation = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    pattern = re.compile(r"(?<![\w-])(" + alternation + r")(?![\w-])")
    out: list[str] = []
    for line in gbnf.splitlines():
        if " ::= " not in line:
            continue
        name, body = line.split(" ::= ", 1)
        # Quoted literals and character classes must not be renamed.
        pieces = re.split(r'("(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\])', body)
        renamed = "".join(
            p if p.startswith(('"', "[")) else pattern.sub(lambda m: f"{prefix}{m.group(1)}", p)
            for p in pieces
        )
        out.append(f"{prefix}{name} ::= {renamed}")
    return "\n".join(out)


def _convert(convert: SchemaToGbnf, schema: dict[str, Any], order: Sequence[str] | None) -> str:
    try:
        return convert(json.dumps(schema), order)
    except Exception:  # the converter raises bare Exceptions on unsupported keywords
        return convert(json.dumps(_ANY_OBJECT), None)


def _call_schema(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "arguments": tool.parameters},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _calls_gbnf(convert: SchemaToGbnf, tools: Sequence[ToolSpec]) -> tuple[str, list[str]]:
    rules: list[str] = []
    alternatives: list[str] = []
    for i, tool in enumerate(tools):
        prefix = f"t{i}-"
        try:
            gbnf = convert(json.dumps(_call_schema(tool)), ["name", "arguments"])
        except Exception:
            loose = {**_call_schema(tool)}
            loose["properties"] = {"name": {"const": tool.name}, "arguments": _ANY_OBJECT}
            gbnf = convert(json.dumps(loose), ["name", "arguments"])
        rules.append(_embed(gbnf, prefix))
        alternatives.append(f"{prefix}root")
    return "\n".join(rules), alternatives


def build_grammar(
    request: ChatRequest, convert: SchemaToGbnf, *, loose: bool = False
) -> str | None:
    """The GBNF that constrains this request's output, or None for free generation.
    ``loose`` keeps the call structure but lets every schema be any JSON object (the
    fallback when the strict grammar does not parse)."""
    if loose:
        request = _loosened(request)
    grammar = _build(request, convert)
    return None if grammar is None else sanitize_gbnf(grammar)


def _loosened(request: ChatRequest) -> ChatRequest:
    fmt = request.response_format
    if isinstance(fmt, JsonSchemaFormat):
        fmt = dataclasses.replace(fmt, schema=_ANY_OBJECT)
    tools = tuple(dataclasses.replace(t, parameters=_ANY_OBJECT) for t in request.tools)
    return dataclasses.replace(request, tools=tools, response_format=fmt)


def _build(request: ChatRequest, convert: SchemaToGbnf) -> str | None:
    tools = offered_tools(request)
    choice = request.tool_choice
    if tools:
        if isinstance(choice, ForcedTool):
            tool = request.tool(choice.name)
            schema = tool.parameters if tool is not None else _ANY_OBJECT
            args = _embed(_convert(convert, schema, None), "a-")
            return f'root ::= a-root "}}"\n{args}'
        rules, alternatives = _calls_gbnf(convert, tools)
        calls = " | ".join(alternatives)
        if choice == "required":
            return f"root ::= {calls}\n{rules}"
        return (
            f"root ::= {_literal(OPEN_TAG + chr(10))} ( {calls} ) {_literal(chr(10) + CLOSE_TAG)}"
            f" | free-text\nfree-text ::= [^<`{{\\[ \\t\\n\\r] [^\\x00]*\n{rules}"
        )
    fmt = request.response_format
    if isinstance(fmt, JsonSchemaFormat):
        return _convert(convert, fmt.schema, None)
    if fmt == "json_object":
        return _convert(convert, _ANY_OBJECT, None)
    return None
