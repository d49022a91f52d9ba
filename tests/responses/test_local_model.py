"""The embedded local model through ``/v1/responses`` (slow: the real Qwen2.5-0.5B): a
forced strict function call is schema-valid, and a streamed one arrives whole."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import openai
import pytest

from tests.local.conftest import CONSTRAINED
from tests.support.gateway_proc import GatewayProcess

pytestmark = pytest.mark.slow

THERMOSTAT: dict[str, Any] = {
    "type": "function",
    "name": "set_thermostat",
    "description": "Set a room's heating.",
    "parameters": {
        "type": "object",
        "properties": {
            "room": {"type": "string", "enum": ["kitchen", "bedroom", "office"]},
            "celsius": {"type": "integer"},
        },
        "required": ["room", "celsius"],
        "additionalProperties": False,
    },
}  # strict by default here
FORCED: dict[str, Any] = {
    "model": CONSTRAINED,
    "tools": [THERMOSTAT],
    "temperature": 0,
    "max_output_tokens": 120,
    "tool_choice": {"type": "function", "name": "set_thermostat"},
}


def test_local_model_answers_a_strict_call(local_gateway: GatewayProcess) -> None:
    with openai.OpenAI(
        base_url=local_gateway.base_url + "/v1",
        api_key=local_gateway.api_key,
        max_retries=0,
        timeout=180,
    ) as client:
        response = client.responses.create(input="Heat the kitchen to 21 degrees.", **FORCED)
        calls = [item for item in response.output if item.type == "function_call"]
        assert calls, response.output
        for call in calls:
            jsonschema.validate(json.loads(call.arguments), THERMOSTAT["parameters"])
        with client.responses.stream(input="Cool the office to 18.", **FORCED) as stream:
            final = stream.get_final_response()
    [streamed] = [item for item in final.output if item.type == "function_call"]
    jsonschema.validate(json.loads(streamed.arguments), THERMOSTAT["parameters"])
