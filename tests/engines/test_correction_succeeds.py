"""A correction that works on a real engine: Qwen2.5-0.5B behind llama-cpp-python's server,
the gateway enforcing (``constrained = false``) with its correction under the engine's
grammar (``correction = "constrained"``). Asked to order 2 apples from a tool whose
``quantity`` has ``minimum: 100`` (beyond the engine's grammar), the model answers 2; the
gateway sends the correction in the engine's own form and the model's second answer is
valid. The client gets one call, valid, after one correction, through the openai SDK."""

from __future__ import annotations

from typing import Any

import openai

import validator
from tests.engines.conftest import FIX
from tests.engines.test_llama_cpp_python import ASK, FORCED, ORDER, TOOL
from tests.support.gateway_proc import GatewayProcess


def test_an_invalid_first_call_comes_back_corrected(fixing_gateway: GatewayProcess) -> None:
    with openai.OpenAI(
        base_url=fixing_gateway.base_url + "/v1",
        api_key=fixing_gateway.api_key,
        max_retries=0,
        timeout=300,
    ) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=FIX,
            messages=ASK,
            tools=[TOOL],
            tool_choice=FORCED,
            max_tokens=40,
            temperature=0,
        )
    completion = raw.parse()
    assert raw.headers["x-syntic-schema-retries"] == "1"  # the first answer was invalid
    calls: Any = completion.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1 and calls[0].function.name == "order"
    assert not validator.compile(ORDER).validate_json(calls[0].function.arguments)
    usage = completion.usage
    assert usage is not None and usage.completion_tokens > 0
