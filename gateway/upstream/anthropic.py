"""Upstream adapter for providers speaking the Anthropic Messages API (``provider =
"anthropic"``).

Canonical request -> ``POST {base_url}/messages`` (``x-api-key``, ``anthropic-version``);
the response and its SSE stream -> canonical. ``tool_use.input`` objects become
``raw_arguments`` JSON text; ``input_json_delta`` fragments become ``ToolCallDelta``.
httpx errors are translated here, once, into ``UpstreamError`` / ``UpstreamTimeout``.

Example::

    upstream = AnthropicUpstream(client=httpx.AsyncClient(), env=settings.env)
    response = await upstream.complete(request, model_config)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import httpx
import orjson

from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    StreamEvent,
    ToolCall,
)
from gateway.errors import UpstreamError, UpstreamTimeout
from gateway.settings import ModelConfig, Settings
from gateway.upstream.anthropic_codec import (
    StreamDecoder,
    encode_request,
    finish_reason,
    iter_sse,
    usage_of,
)
from gateway.upstream.redact import scrub
from gateway.upstream.retry import UpstreamStatusError, parse_retry_after
from gateway.upstream.transport import (
    ERROR_BODY_BYTES,
    model_timeout,
    open_stream,
    post_capped,
)

__all__ = ["ANTHROPIC_VERSION", "AnthropicUpstream", "create", "decode_response"]

ANTHROPIC_VERSION = "2023-06-01"


def decode_response(body: object, model: ModelConfig) -> ChatResponse:
    """An Anthropic ``message`` object -> canonical ``ChatResponse``."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        raise UpstreamError("The upstream returned a malformed message.")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in body["content"]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    raw_arguments=orjson.dumps(block.get("input", {})).decode(),
                )
            )
    return ChatResponse(
        id=str(body.get("id", "")),
        model=str(body.get("model", model.upstream_model)),
        content="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        finish_reason=finish_reason(body.get("stop_reason")),
        usage=usage_of(body.get("usage")),
        stop_sequence=stop if isinstance(stop := body.get("stop_sequence"), str) else None,
    )


class _Answer(Protocol):
    """What an error message needs of an answer: ``Reply``, ``LineStream``, ``HttpxLines``."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


def _text(body: bytes | None) -> str:
    """An error answer's text; empty when it went over ``ERROR_BODY_BYTES``."""
    return (body or b"").decode("utf-8", "replace")


def _error_message(response: _Answer, text: str, secret: str | None = None) -> str:
    detail = text[:500]
    try:
        body = orjson.loads(text)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            detail = str(body["error"].get("message", detail))
    except orjson.JSONDecodeError:
        pass  # not JSON: keep the raw text (truncated) as the detail
    # scrub: upstreams echo credentials in error text (#9)
    return scrub(f"Upstream returned HTTP {response.status_code}: {detail}", secret)


def _status_error(
    response: _Answer, text: str, secret: str | None = None
) -> UpstreamStatusError:
    # status-aware, so 429/529/502/503 are retried (gateway.upstream.retry, #9)
    return UpstreamStatusError(
        _error_message(response, text, secret),
        upstream_status=response.status_code,
        retry_after_s=parse_retry_after(response.headers.get("retry-after")),
    )


class AnthropicUpstream:
    """The Upstream Protocol over an Anthropic-compatible ``/v1/messages`` endpoint.

    ``client`` is the app's one pooled ``httpx.AsyncClient`` (the adapter never closes a
    client it was given); ``env`` is where ``api_key_env`` is looked up.
    """

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        anthropic_version: str = ANTHROPIC_VERSION,
    ) -> None:
        self._env: Mapping[str, str] = env or {}
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient()
        self._version = anthropic_version

    def _url(self, model: ModelConfig) -> str:
        base = model.base_url.rstrip("/")
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    def _headers(self, model: ModelConfig) -> dict[str, str]:
        headers = {"anthropic-version": self._version, "content-type": "application/json"}
        key = model.api_key(self._env)
        if key:
            headers["x-api-key"] = key
        return headers

    def _timeout(self, model: ModelConfig) -> httpx.Timeout:
        return model_timeout(model.timeout_s)

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        payload = encode_request(request, model, stream=False)
        try:
            reply = await post_capped(
                self._client, self._url(model), orjson.dumps(payload), self._headers(model),
                self._timeout(model), limit=None, error_limit=ERROR_BODY_BYTES,
            )
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout("The upstream model timed out.") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(f"Could not reach the upstream model: {exc}") from exc
        if reply.status_code >= 400:
            raise _status_error(reply, _text(reply.body), model.api_key(self._env))
        try:
            body: Any = orjson.loads(reply.body or b"")
        except orjson.JSONDecodeError as exc:
            raise UpstreamError("The upstream returned a body that is not JSON.") from exc
        return decode_response(body, model)

    async def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        payload = encode_request(request, model, stream=True)
        headers = {**self._headers(model), "accept": "text/event-stream"}
        try:
            async with open_stream(
                self._client, self._url(model), orjson.dumps(payload), headers,
                self._timeout(model),
            ) as response:
                if response.status_code >= 400:
                    text = _text(await response.read_capped(ERROR_BODY_BYTES))
                    raise _status_error(response, text, model.api_key(self._env))
                decoder = StreamDecoder(model.api_key(self._env))
                async for name, data in iter_sse(response.lines()):
                    for event in decoder.feed(name, data):
                        yield event
                for event in decoder.end():
                    yield event
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout("The upstream model timed out mid-stream.") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(f"The upstream stream failed: {exc}") from exc

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def create(client: httpx.AsyncClient, settings: Settings) -> AnthropicUpstream:
    """Registry factory (see ``gateway.upstream.registry``)."""
    return AnthropicUpstream(env=settings.env, client=client)
