"""The in-process local model provider (``provider = "local"``).

Importing this package does not import llama-cpp-python; the runtime is loaded on the first
request. ``create`` is the factory the upstream registry calls.
"""

from __future__ import annotations

from gateway.settings import Settings
from gateway.upstream.local.adapter import LocalUpstream
from gateway.upstream.transport import UpstreamHttp

__all__ = ["LocalUpstream", "create"]


def create(http: UpstreamHttp, settings: Settings) -> LocalUpstream:
    """The registry's factory: the HTTP client is unused (everything is in-process).
    ``SYNTIC_LOCAL_THREADS`` (default 1) and ``SYNTIC_LOCAL_CTX`` (default 4096) tune it."""
    return LocalUpstream(env=settings.env)
