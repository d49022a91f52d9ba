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

from collections.abc import AsyncIterator
from typing import Protocol

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
