"""Usage an engine did not report, counted with the engine's own tokenizer.

llama-cpp-python's server sends no usage in streams; it and llama.cpp's ``llama-server``
have a tokenize endpoint (the profile's ``tokenize``, ``gateway.engines``). The completion
is counted exactly: the text and tool-call arguments that came back, through the engine's
tokenizer. The prompt cannot be: the engine renders it with its chat template (a system
prompt of its own, tool definitions in its own words, or none), which the gateway does not
see, so the prompt count (each message's role, text and tool calls and each tool's
definition, through the same tokenizer) is an estimate, and the usage stays marked
``estimated``. Any failure of the endpoint leaves the figures to the gateway's byte
estimate; counting never fails a request.

Example::

    usage = await engine_usage(http, model, headers, request, completion_text)
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.canonical import ChatRequest, Usage
from gateway.errors import GatewayError
from gateway.settings import ModelConfig
from gateway.upstream.tokens import prompt_texts
from gateway.upstream.transport import Target, UpstreamHttp

__all__ = ["engine_usage", "server_root"]

_TIMEOUT_S = 10.0  # a tokenizer answers in milliseconds; a stuck one must not hold the bill
_REPLY_BYTES = 8 * 1024 * 1024  # a token list of a long prompt, as JSON


def server_root(base_url: str) -> str:
    """``base_url`` without its ``/v1`` (the engines serve their extras beside it)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def _count(http: UpstreamHttp, target: Target, field: str, text: str) -> int | None:
    if not text:
        return 0
    try:
        reply = await http.post(
            target.url,
            orjson.dumps({field: text}),
            target.headers,
            target.route,
            timeout_s=_TIMEOUT_S,
            limit=_REPLY_BYTES,
        )
    except GatewayError:
        return None
    if reply.status_code != 200:
        return None
    try:
        data: Any = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return None
    tokens = data.get("tokens") if isinstance(data, Mapping) else None
    return len(tokens) if isinstance(tokens, list) else None


async def engine_usage(
    http: UpstreamHttp,
    model: ModelConfig,
    headers: Mapping[str, str],
    request: ChatRequest,
    completion: str,
) -> Usage | None:
    """The call's usage through the engine's tokenize endpoint (the completion exact, the
    prompt estimated: module docstring), or None (no endpoint in the profile, or it
    failed)."""
    tokenize = model.profile.tokenize
    if tokenize is None:
        return None
    target = Target.build(
        server_root(model.base_url) + tokenize.path, headers, http.connections.route(model)
    )
    prompt = "\n".join(prompt_texts(request))
    counts = await asyncio.gather(
        _count(http, target, tokenize.field, prompt),
        _count(http, target, tokenize.field, completion),
    )
    if counts[0] is None or counts[1] is None:
        return None
    return Usage(counts[0], counts[1], estimated=True)
