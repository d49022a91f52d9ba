"""A strict tool call through the official ``openai`` SDK.

Run it against a gateway (``scripts/run`` prints a key)::

    SYNTIC_API_KEY=sk_live_... python examples/openai_chat.py

``SYNTIC_BASE_URL`` is the gateway (default ``http://127.0.0.1:8080``), ``SYNTIC_MODEL``
the model (default ``qwen2.5-0.5b``). It prints the tool call's arguments, which the
gateway guarantees match the schema, and how many correction calls that took; on a
failure it prints the gateway's error envelope and exits 1.
"""

from __future__ import annotations

import json
import os
import sys

import openai
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
    ChatCompletionNamedToolChoiceParam,
)

REFUND_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "create_refund",
        "description": "Refund part or all of an order.",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
                "amount_pence": {"type": "integer", "minimum": 1},
            },
            "required": ["order_number", "amount_pence"],
            "additionalProperties": False,
        },
    },
}
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Refund 12.50 GBP on order 582131."},
]
FORCE_REFUND: ChatCompletionNamedToolChoiceParam = {
    "type": "function",
    "function": {"name": "create_refund"},
}


def main() -> int:
    base_url = os.environ.get("SYNTIC_BASE_URL", "http://127.0.0.1:8080").rstrip("/")
    client = openai.OpenAI(
        base_url=base_url + "/v1", api_key=os.environ["SYNTIC_API_KEY"], max_retries=0
    )
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=os.environ.get("SYNTIC_MODEL", "qwen2.5-0.5b"),
            messages=MESSAGES,
            tools=[REFUND_TOOL],
            tool_choice=FORCE_REFUND,
        )
    except openai.APIStatusError as exc:  # the gateway refused: its envelope says why
        print(f"error {exc.status_code}: {json.dumps(exc.body)}", file=sys.stderr)
        return 1
    except openai.APIConnectionError as exc:
        print(f"cannot reach the gateway at {base_url}: {exc}", file=sys.stderr)
        return 1
    completion = raw.parse()
    for call in completion.choices[0].message.tool_calls or []:
        if call.type == "function":
            arguments = json.loads(call.function.arguments)  # always valid for a strict tool
            print(f"{call.function.name} {json.dumps(arguments, sort_keys=True)}")
    print(f"schema retries: {raw.headers.get('x-syntic-schema-retries')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
