"""``GET /v1/models``: the catalogue, OpenAI list format, plus ``capabilities``."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.settings import ModelConfig, Settings


def model_entry(model: ModelConfig) -> dict[str, Any]:
    return {
        "id": model.name,
        "object": "model",
        "created": 0,
        "owned_by": "syntic",
        "capabilities": {
            "strict_tools": model.strict_tools,
            "constrained": model.constrained,
            "json_schema_output": model.json_schema_output,
            "streaming": model.streaming,
        },
    }


def models_payload(settings: Settings) -> bytes:
    return orjson.dumps({"object": "list", "data": [model_entry(m) for m in settings.models]})


async def list_models(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    return Response(models_payload(settings), media_type="application/json")
