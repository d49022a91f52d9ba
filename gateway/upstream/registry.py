"""Provider name -> upstream adapter.

A provider is named once, in ``gateway.settings.Provider``; its adapter is the module
``gateway.upstream.<name>``, which exposes ``create(http: UpstreamHttp, settings) ->
Upstream`` and is imported only when a configured model uses it (``openai``: any
OpenAI-compatible server; ``anthropic``; ``local``: the in-process local model).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import get_args

from gateway.errors import NotFound
from gateway.settings import ModelConfig, Provider, Settings
from gateway.upstream.base import Upstream
from gateway.upstream.transport import UpstreamHttp

PROVIDER_MODULES: Mapping[str, str] = {p: f"gateway.upstream.{p}" for p in get_args(Provider)}

Factory = Callable[[UpstreamHttp, Settings], Upstream]


class UpstreamRegistry:
    """The adapters for the configured providers, sharing one HTTP client."""

    def __init__(self, adapters: Mapping[str, Upstream]) -> None:
        self._adapters = dict(adapters)

    @classmethod
    def build(
        cls,
        settings: Settings,
        http: UpstreamHttp,
        overrides: Mapping[str, Upstream] | None = None,
    ) -> UpstreamRegistry:
        """One adapter per provider used in ``settings`` (``overrides`` win, for tests)."""
        adapters: dict[str, Upstream] = dict(overrides or {})
        for provider in {m.provider for m in settings.models}:
            if provider in adapters:
                continue
            module = importlib.import_module(PROVIDER_MODULES[provider])
            factory: Factory = module.create
            adapters[provider] = factory(http, settings)
        return cls(adapters)

    def wrapped(self, wrap: Callable[[Upstream], Upstream]) -> UpstreamRegistry:
        """The same adapters, each wrapped (e.g. ``MeteredUpstream`` times every call)."""
        return UpstreamRegistry({name: wrap(a) for name, a in self._adapters.items()})

    def get(self, model: ModelConfig) -> Upstream:
        adapter = self._adapters.get(model.provider)
        if adapter is None:
            raise NotFound(
                f"No upstream adapter for provider {model.provider!r}.",
                code="model_not_found",
                param="model",
            )
        return adapter

    async def aclose(self) -> None:
        for adapter in self._adapters.values():
            await adapter.aclose()
