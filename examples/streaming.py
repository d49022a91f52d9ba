"""A streamed strict tool call through the official ``openai`` SDK.

Run it against a gateway (``scripts/run`` prints a key)::

    SYNTIC_API_KEY=sk_live_... python examples/streaming.py

``SYNTIC_BASE_URL`` is the gateway (default ``http://127.0.0.1:8080``), ``SYNTIC_MODEL``
the model (default ``qwen2.5-0.5b``). The gateway holds a strict call's argument
fragments back until the whole call validates (or is corrected), so what arrives is
always valid. It prints each fragment as it arrives, then the whole arguments and the
correction calls made (from the final usage chunk); if the stream ends with an error
event (the call stayed invalid, the upstream failed), it prints the error and exits 1.
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
    arguments: dict[int, str] = {}  # tool call index -> its argument text so far
    retries = None
    try:
        stream = client.chat.completions.create(
            model=os.environ.get("SYNTIC_MODEL", "qwen2.5-0.5b"),
            messages=MESSAGES,
            tools=[REFUND_TOOL],
            tool_choice=FORCE_REFUND,
            stream=True,
            stream_options={"include_usage": True},  # the last chunk carries the usage
        )
        for chunk in stream:
            if chunk.usage is not None:
                retries = (chunk.usage.model_extra or {}).get("schema_retries")
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    if call.function is not None and call.function.arguments:
                        print(f"fragment: {call.function.arguments}")
                        arguments[call.index] = (
                            arguments.get(call.index, "") + call.function.arguments
                        )
    except openai.APIStatusError as exc:  # refused before the stream started
        print(f"error {exc.status_code}: {json.dumps(exc.body)}", file=sys.stderr)
        return 1
    except openai.APIConnectionError as exc:
        print(f"cannot reach the gateway at {base_url}: {exc}", file=sys.stderr)
        return 1
    except openai.APIError as exc:  # the in-band error event that ends a failed stream
        print(f"stream failed: {json.dumps(exc.body)}", file=sys.stderr)
        return 1
    for index, text in sorted(arguments.items()):
        print(f"call {index}: {json.dumps(json.loads(text), sort_keys=True)}")
    print(f"schema retries: {retries}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
