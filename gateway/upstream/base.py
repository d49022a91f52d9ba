"""The seam between the gateway and a model provider.

An adapter translates canonical requests into its provider's wire format and back. It
raises only the gateway's own errors (``UpstreamError``, ``UpstreamTimeout``), translated
once at this boundary from the transport's exceptions.

Example::

    upstream = registry.get(model_config)
    response = await upstream.complete(request, model_config)
    async for event in upstream.stream(request, model_config):
        ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from gateway.canonical import ChatRequest, ChatResponse, StreamEvent
from gateway.settings import ModelConfig


class Upstream(Protocol):
    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        """One non-streaming call. ``request.model`` is the catalogue name; use
        ``model.upstream_model`` on the wire."""
        ...

    def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        """One streaming call: canonical events, ending with ``Finish`` (and ``UsageReport``
        when the provider reports usage). Closing the iterator cancels the upstream call."""
        ...

    async def aclose(self) -> None: ...


TokenSource = Literal["upstream", "tokenizer", "estimate"]


@dataclass(frozen=True, slots=True)
class TokenCount:
    """What ``count_tokens`` answers: the prompt's input tokens, and how they were found:
    ``upstream`` (the provider counted), ``tokenizer`` (the model's own tokenizer, exact
    for the rendered prompt) or ``estimate`` (another tokenizer, or bytes / 4)."""

    input_tokens: int
    source: TokenSource


@runtime_checkable
class TokenCounter(Protocol):
    """An adapter that can size a prompt without generating (``/v1/messages/count_tokens``).
    ``body`` is the client's Anthropic request, as sent (minus ``max_tokens``)."""

    async def count_tokens(
        self, request: ChatRequest, body: Mapping[str, Any], model: ModelConfig
    ) -> TokenCount: ...
