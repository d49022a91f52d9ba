"""Grammars for constrained local models: every awkward schema, every tool_choice mode,
must give a grammar llama.cpp can parse (an unparseable one would crash the process)."""

from __future__ import annotations

import os
import re

import pytest

from gateway.canonical import (
    ChatRequest,
    ForcedTool,
    JsonSchemaFormat,
    Message,
    TextPart,
    ToolChoice,
    ToolSpec,
)
from gateway.upstream.local.grammar import build_grammar, sanitize_gbnf
from tests.local.awkward import CASES

llama_cpp = pytest.importorskip("llama_cpp", reason="run scripts/install-local-model")
convert = llama_cpp.llama_grammar.json_schema_to_gbnf

TOOLS = tuple(
    {
        c.tool["name"]: ToolSpec(name=c.tool["name"], parameters=c.schema, strict=True)
        for c in CASES
    }.values()
)
CHOICES: list[ToolChoice | None] = [None, "required", *(ForcedTool(t.name) for t in TOOLS)]


def _request(**fields: object) -> ChatRequest:
    msg = Message(role="user", content=(TextPart("x"),))
    return ChatRequest(model="m", messages=(msg,), **fields)  # type: ignore[arg-type]


def _rules(gbnf: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in gbnf.splitlines() if " ::= " in line)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (r'x ::= "a\.b"', r'x ::= "a.b"'),
        (r'x ::= "\"q\"" [^"\\] "\n\t"', r'x ::= "\"q\"" [^"\\] "\n\t"'),
        (r"x ::= [\]\[] \x41", r"x ::= [\]\[] \x41"),
        (r'x ::= "\\." "\-"', r'x ::= "\\." "-"'),
    ],
)
def test_sanitize(raw: str, clean: str) -> None:
    assert sanitize_gbnf(raw) == clean


@pytest.mark.parametrize("choice", CHOICES, ids=repr)
def test_every_rule_referenced_is_defined(choice: ToolChoice | None) -> None:
    gbnf = build_grammar(_request(tools=TOOLS, tool_choice=choice), convert)
    assert gbnf is not None
    rules = _rules(gbnf)
    assert "root" in rules
    for body in rules.values():
        bare = re.sub(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]', " ", body)
        for name in re.findall(r"[a-zA-Z][\w-]*", bare):
            assert name in rules, f"{name} used but not defined"


def test_no_tools_no_format_is_free() -> None:
    assert build_grammar(_request(), convert) is None
    assert build_grammar(_request(tools=TOOLS, tool_choice="none"), convert) is None


def test_loose_keeps_the_call_shape() -> None:
    request = _request(tools=TOOLS[:1], tool_choice=ForcedTool(TOOLS[0].name))
    strict = build_grammar(request, convert)
    loose = build_grammar(request, convert, loose=True)
    assert strict is not None and loose is not None and strict != loose
    assert loose.startswith('root ::= a-root "}"')


@pytest.mark.slow
def test_llama_cpp_parses_every_grammar(local_runtime: None) -> None:
    from gateway.upstream.local.catalog import resolve_model_path
    from gateway.upstream.local.engine import LocalEngine

    engine = LocalEngine(resolve_model_path("qwen2.5-0.5b", os.environ), n_ctx=256)
    runtime = llama_cpp
    engine._ensure_loaded()
    assert not engine._parses(runtime, "root ::= ( unclosed")
    formats = [JsonSchemaFormat(schema=c.schema, strict=True) for c in CASES[::5]]
    requests = [_request(tools=TOOLS, tool_choice=c) for c in CHOICES]
    requests += [_request(response_format=f) for f in formats]
    requests.append(_request(response_format="json_object"))
    for request in requests:
        gbnf = build_grammar(request, convert)
        assert gbnf is not None and engine._parses(runtime, gbnf), gbnf
