"""``/v1/messages/count_tokens`` for the local model: its own template and tokenizer, so the
count is the prompt tokens a message with the same input is billed."""

from __future__ import annotations

from typing import Any

import anthropic

from tests.local.conftest import FREE
from tests.support.gateway_proc import GatewayProcess

MESSAGES: list[Any] = [{"role": "user", "content": "Say hello to the kitchen."}]


def test_the_count_is_the_prompt_a_message_is_billed(local_gateway: GatewayProcess) -> None:
    with anthropic.Anthropic(
        base_url=local_gateway.base_url, api_key=local_gateway.api_key, max_retries=0
    ) as client:
        raw = client.messages.with_raw_response.count_tokens(
            model=FREE, system="Be brief.", messages=MESSAGES
        )
        message = client.messages.create(
            model=FREE, system="Be brief.", messages=MESSAGES, max_tokens=1
        )
    assert raw.headers["x-syntic-token-count"] == "tokenizer"
    assert raw.parse().input_tokens == message.usage.input_tokens > 0
