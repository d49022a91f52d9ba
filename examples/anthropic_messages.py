"""A strict tool call through the official ``anthropic`` SDK (``POST /v1/messages``).

Run it against a gateway (``scripts/run`` prints a key)::

    SYNTIC_API_KEY=sk_live_... python examples/anthropic_messages.py

``SYNTIC_BASE_URL`` is the gateway (default ``http://127.0.0.1:8080``), ``SYNTIC_MODEL``
the model (default ``qwen2.5-0.5b``; any configured model, whatever its provider). It
prints the tool call's input, which the gateway guarantees matches ``input_schema``, and
how many correction calls that took; on a failure it prints the gateway's error envelope
and exits 1.
"""

from __future__ import annotations

import json
import os
import sys

import anthropic
from anthropic.types import MessageParam, ToolChoiceToolParam, ToolParam

REFUND_TOOL: ToolParam = {
    "name": "create_refund",
    "description": "Refund part or all of an order.",
    "strict": True,
    "input_schema": {
        "type": "object",
        "properties": {
            "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
            "amount_pence": {"type": "integer", "minimum": 1},
        },
        "required": ["order_number", "amount_pence"],
        "additionalProperties": False,
    },
}
MESSAGES: list[MessageParam] = [
    {"role": "user", "content": "Refund 12.50 GBP on order 582131."},
]
FORCE_REFUND: ToolChoiceToolParam = {"type": "tool", "name": "create_refund"}


def main() -> int:
    base_url = os.environ.get("SYNTIC_BASE_URL", "http://127.0.0.1:8080").rstrip("/")
    client = anthropic.Anthropic(
        base_url=base_url, api_key=os.environ["SYNTIC_API_KEY"], max_retries=0
    )
    try:
        message = client.messages.create(
            model=os.environ.get("SYNTIC_MODEL", "qwen2.5-0.5b"),
            max_tokens=256,
            messages=MESSAGES,
            tools=[REFUND_TOOL],
            tool_choice=FORCE_REFUND,
        )
    except anthropic.APIStatusError as exc:  # the gateway refused: its envelope says why
        print(f"error {exc.status_code}: {json.dumps(exc.body)}", file=sys.stderr)
        return 1
    except anthropic.APIConnectionError as exc:
        print(f"cannot reach the gateway at {base_url}: {exc}", file=sys.stderr)
        return 1
    for block in message.content:
        if block.type == "tool_use":  # block.input is a dict matching input_schema
            print(f"{block.name} {json.dumps(block.input, sort_keys=True)}")
    retries = (message.usage.model_extra or {}).get("schema_retries")
    print(f"schema retries: {retries}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
