"""A client's value of the wrong shape is the client's mistake: every scalar of a valid
request body (a string, a number, a flag), replaced by a list or an object, is answered
without a 500, on every dialect and across wires. An unhashable value used as a lookup
key (a role, a type) once raised a TypeError the envelope turned into a 500."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import ScriptedUpstream
from tests.support.three_wires import start_three_wire_gateway

SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string"}},
    "required": ["order"],
    "additionalProperties": False,
}

CHAT = {
    "model": "oa",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Refund order 1."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "refund", "arguments": '{"order": "1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {"name": "refund", "strict": True, "parameters": SCHEMA},
        }
    ],
    "tool_choice": {"type": "function", "function": {"name": "refund"}},
    "response_format": {"type": "text"},
    "max_completion_tokens": 64,
    "temperature": 0.5,
    "n": 1,
}

RESPONSES = {
    "model": "rs",
    "instructions": "Be brief.",
    "input": [
        {"type": "message", "role": "user", "content": "Refund order 1."},
        {"type": "function_call", "call_id": "call_1", "name": "refund", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "done"},
    ],
    "tools": [{"type": "function", "name": "refund", "strict": True, "parameters": SCHEMA}],
    "tool_choice": {"type": "function", "name": "refund"},
    "max_output_tokens": 64,
    "store": False,
}

MESSAGES = {
    "model": "an",
    "max_tokens": 64,
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Refund order 1."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu_1", "name": "refund", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "done"}],
        },
    ],
    "tools": [{"name": "refund", "strict": True, "input_schema": SCHEMA}],
    "tool_choice": {"type": "tool", "name": "refund"},
}


def _scalar_paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every path to a string, number or flag in ``value``, schemas left out (their
    shapes are the validator's, tested on their own)."""
    if isinstance(value, dict):
        for key, child in value.items():
            if key not in ("parameters", "input_schema"):
                yield from _scalar_paths(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _scalar_paths(child, (*path, i))
    elif value is not None:
        yield path


def _replaced(body: dict[str, Any], path: tuple[str | int, ...], new: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    target: Any = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return out


SHAPES: tuple[Any, ...] = ([], {"a": 1})
CASES = [
    (endpoint, body, path, shape)
    for endpoint, body in (
        ("/v1/chat/completions", CHAT),
        ("/v1/chat/completions", {**CHAT, "model": "an"}),
        ("/v1/responses", RESPONSES),
        ("/v1/messages", MESSAGES),
        ("/v1/messages", {**MESSAGES, "model": "oa"}),
    )
    for path in _scalar_paths(body)
    for shape in SHAPES
]


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    data_dir: Path = tmp_path_factory.mktemp("value-shapes")
    gateway = start_three_wire_gateway(scripted_upstream_server, data_dir)
    try:
        yield gateway
    finally:
        gateway.stop()


def test_every_scalar_is_covered() -> None:
    assert len(CASES) > 150  # the bodies above hold every kind of turn and tool


def test_a_list_or_object_for_any_scalar_is_never_a_500(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    failures = []
    with httpx.Client(
        base_url=gw.base_url,
        headers={"authorization": f"Bearer {gw.api_key}", "x-api-key": gw.api_key},
        timeout=30,
    ) as client:
        for endpoint, body, path, shape in CASES:
            answer = client.post(endpoint, json=_replaced(body, path, shape))
            if answer.status_code >= 500 and answer.status_code != 502:
                failures.append((endpoint, body["model"], path, shape, answer.text[:200]))
            elif answer.status_code == 400:
                assert answer.json()["error"]["type"] == "invalid_request_error", answer.text
    assert failures == []
