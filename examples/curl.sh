#!/usr/bin/env bash
# The strict tool call of examples/openai_chat.py with curl: POST /v1/chat/completions.
#
#   SYNTIC_API_KEY=sk_live_... examples/curl.sh
#
# SYNTIC_BASE_URL is the gateway (default http://127.0.0.1:8080), SYNTIC_MODEL the model
# (default qwen2.5-0.5b). Prints the response headers (x-syntic-schema-retries: the
# correction calls made) and the JSON body; on an error status it prints the error
# envelope and exits non-zero (curl --fail-with-body).
set -euo pipefail
: "${SYNTIC_API_KEY:?set SYNTIC_API_KEY to a gateway key (sk_live_...)}"
BASE_URL=${SYNTIC_BASE_URL:-http://127.0.0.1:8080}
MODEL=${SYNTIC_MODEL:-qwen2.5-0.5b}

curl --silent --show-error --fail-with-body --include \
  "${BASE_URL%/}/v1/chat/completions" \
  -H "Authorization: Bearer $SYNTIC_API_KEY" \
  -H "Content-Type: application/json" \
  --data-binary @- <<JSON
{
  "model": "$MODEL",
  "messages": [{"role": "user", "content": "Refund 12.50 GBP on order 582131."}],
  "tools": [{
    "type": "function",
    "function": {
      "name": "create_refund",
      "strict": true,
      "parameters": {
        "type": "object",
        "properties": {
          "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
          "amount_pence": {"type": "integer", "minimum": 1}
        },
        "required": ["order_number", "amount_pence"],
        "additionalProperties": false
      }
    }
  }],
  "tool_choice": {"type": "function", "function": {"name": "create_refund"}}
}
JSON
echo
