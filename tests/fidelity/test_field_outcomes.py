"""Every top-level field of the table, to an upstream of every wire, through the
official SDKs: the outcome the table declares is what the upstream recorded.

- forwarded: the upstream got the field (or, from another wire, its ``to`` field) with
  the client's value;
- translated: the upstream got the target field (with the converted value, when the
  rule converts);
- dropped: the upstream did not get the client's value, and ``x-syntic-dropped`` names it;
- refused: 400 ``unsupported_parameter`` with the field in ``param``, nothing sent;
- honoured: the request went through and nothing named it dropped.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from gateway.dialects.policy import HEADER_FIELDS, RULES, Rule
from tests.fidelity.conftest import MODEL_FOR
from tests.support.scripted_upstream import RecordedRequest, Reply, ScriptedUpstream

FUNCTION_TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}
RESPONSES_TOOL = {
    "type": "function",
    "name": "lookup",
    "strict": False,
    "parameters": {"type": "object", "properties": {}},
}
MESSAGES_TOOL = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
EMPTY_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}

# A value for each top-level field, as a client would send it.
SAMPLES: dict[str, dict[str, Any]] = {
    "chat": {
        "model": None,
        "messages": None,
        "stream": None,
        "n": 2,
        "stream_options": {"include_usage": True},
        "tools": [FUNCTION_TOOL],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "response_format": {"type": "json_object"},
        "temperature": 0.5,
        "top_p": 0.9,
        "stop": ["END"],
        "max_completion_tokens": 77,
        "max_tokens": 66,
        "user": "u-1",
        "metadata": {"trace": "t"},
        "reasoning_effort": "high",
        "verbosity": "low",
        "service_tier": "priority",
        "prompt_cache_key": "k",
        "prompt_cache_retention": "24h",
        "prompt_cache_options": {"mode": "explicit"},
        "safety_identifier": "sid",
        "moderation": {"mode": "strict"},
        "seed": 3,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.5,
        "logit_bias": {"50256": -100},
        "logprobs": True,
        "top_logprobs": 2,
        "store": True,
        "prediction": {"type": "content", "content": "x"},
        "modalities": ["text", "audio"],
        "audio": {"voice": "alloy", "format": "mp3"},
        "web_search_options": {},
        "functions": [{"name": "f"}],
        "function_call": "auto",
    },
    "responses": {
        "model": None,
        "input": None,
        "stream": None,
        "instructions": "Be brief.",
        "stream_options": {"include_obfuscation": False},
        "tools": [RESPONSES_TOOL],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "text": {"format": {"type": "text"}},
        "temperature": 0.5,
        "top_p": 0.9,
        "metadata": {"k": "v"},
        "store": False,
        "previous_response_id": None,
        "max_output_tokens": 55,
        "user": "u-1",
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "service_tier": "flex",
        "prompt_cache_key": "k",
        "prompt_cache_retention": "24h",
        "prompt_cache_options": {"mode": "explicit"},
        "safety_identifier": "sid",
        "moderation": {"mode": "strict"},
        "truncation": "auto",
        "top_logprobs": 2,
        "max_tool_calls": 3,
        "context_management": [{"type": "compaction"}],
        "image": {"quality": "low"},
        "access_programs": {"ids": ["p"]},
        "client_metadata": {"session": "s"},
        "background": True,
        "background_options": {"x": 1},
        "conversation": "conv_1",
        "prompt": {"id": "pmpt_1"},
    },
    "messages": {
        "model": None,
        "messages": None,
        "max_tokens": None,
        "stream": None,
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": [MESSAGES_TOOL],
        "tool_choice": {"type": "auto"},
        "temperature": 0.5,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u-1"},
        "output_config": {"effort": "medium"},
        "output_format": {"type": "json_schema", "schema": EMPTY_STRICT},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "cache_control": {"type": "ephemeral"},
        "top_k": 5,
        "container": "cntr_1",
        "context_management": {"edits": []},
        "diagnostics": {"previous_message_id": "m"},
        "inference_geo": "us",
        "service_tier": "standard_only",
        "speed": "fast",
        "user_profile_id": "up",
        "workspace_id": "ws",
        "mcp_servers": [{"type": "url", "url": "https://m.test", "name": "m"}],
    },
}


def _top_level(dialect: str) -> list[Rule]:
    return [
        r
        for r in RULES
        if r.dialect == dialect
        and r.field not in HEADER_FIELDS
        and not any(c in r.field for c in ".[ ")
        and SAMPLES[dialect].get(r.field) is not None
    ]


CASES = [(r, wire) for d in SAMPLES for r in _top_level(d) for wire in MODEL_FOR]


def _path(body: Any, path: str) -> Any:
    for name in path.split("."):
        if not isinstance(body, dict) or name not in body:
            return KeyError
        body = body[name]
    return body


def _send(
    rule: Rule, model: str, oai: openai.OpenAI, ant: anthropic.Anthropic
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Status, headers and error (if any) of one request carrying the rule's field."""
    extra = {rule.field: SAMPLES[rule.dialect][rule.field]}
    try:
        if rule.dialect == "chat":
            raw: Any = oai.chat.completions.with_raw_response.create(
                model=model, messages=[{"role": "user", "content": "hi"}], extra_body=extra
            )
        elif rule.dialect == "responses":
            raw = oai.responses.with_raw_response.create(model=model, input="hi", extra_body=extra)
        else:
            raw = ant.messages.with_raw_response.create(
                model=model,
                max_tokens=64,
                messages=[{"role": "user", "content": "hi"}],
                extra_body=extra,
            )
    except (openai.APIStatusError, anthropic.APIStatusError) as exc:
        return exc.status_code, dict(exc.response.headers), exc.response.json()["error"]
    return raw.status_code, dict(raw.headers), {}


@pytest.mark.parametrize(
    ("rule", "wire"), CASES, ids=[f"{r.dialect}-{r.field}-to-{w}" for r, w in CASES]
)
def test_the_upstream_gets_what_the_table_says(
    rule: Rule,
    wire: str,
    oai: openai.OpenAI,
    ant: anthropic.Anthropic,
    upstream: ScriptedUpstream,
) -> None:
    upstream.responder = lambda request: Reply(content="{}")
    outcome = rule.outcome(wire)  # type: ignore[arg-type]
    value = SAMPLES[rule.dialect][rule.field]
    status, headers, error = _send(rule, MODEL_FOR[wire], oai, ant)
    dropped = headers.get("x-syntic-dropped", "").split(",")
    if outcome == "refused":
        assert (status, error["code"], error["param"]) == (400, "unsupported_parameter", rule.field)
        assert upstream.requests == []
        return
    assert status == 200, error
    sent: list[RecordedRequest] = upstream.requests
    body = sent[0].body
    target = rule.target_field(wire)  # type: ignore[arg-type]
    if outcome == "dropped":
        assert rule.notice in dropped
        assert _path(body, rule.field) != value  # absent, or the gateway's own (store)
    elif outcome == "forwarded":
        assert rule.notice not in dropped
        assert _path(body, target) == value, json.dumps(body)
    elif outcome == "translated":
        assert rule.notice not in dropped
        got = _path(body, target)
        assert got is not KeyError, (target, json.dumps(body))
        if rule.convert is not None:
            assert got == rule.convert(wire, value)  # type: ignore[arg-type]
    else:
        assert outcome == "honoured"
        assert rule.notice not in dropped


def test_every_top_level_rule_has_a_case() -> None:
    """A new top-level rule needs a sample here (or an explicit skip: None)."""
    for r in RULES:
        if r.field in HEADER_FIELDS or any(c in r.field for c in ".[ "):
            continue
        assert r.field in SAMPLES[r.dialect], (r.dialect, r.field)
