"""Edge limits: what one hostile or unlucky client can cost the gateway.

- ``EdgeLimits``: the numbers, read from ``Settings`` (``[server]`` / ``SYNTIC_*``).
- ``InflightGate`` (``gateway.ratelimit.inflight``): a bound on the upstream calls metered
  requests may have in flight (one slot a request, ``n`` for ``n`` choices); one over the
  bound is refused at once with 503 ``overloaded`` and ``retry-after``.

The deadlines these numbers set (the body read, the whole request) are armed by
``gateway.server.deadlines``; header-read timeouts and the header size cap live at the
protocol level (``gateway.server.protocol``), because uvicorn hands the app nothing before
the headers.

Example::

    limits = EdgeLimits.from_settings(settings)
    gate = InflightGate(limits.max_inflight)
    with gate.admit(ctx):       # raises Overloaded when full
        ...
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.ratelimit.inflight import InflightGate, default_key_limit
from gateway.settings import Settings

__all__ = ["EdgeLimits", "InflightGate", "default_key_limit"]


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    """The per-request bounds the HTTP middleware enforces."""

    max_inflight: int = 512
    body_timeout_s: float = 30.0
    request_timeout_s: float = 120.0
    max_concurrent_per_key: int = 0  # 0: half of max_inflight
    model_share_per_key: float = 0.5  # of a model's upstream slots, one key's at most

    @classmethod
    def from_settings(cls, settings: Settings) -> EdgeLimits:
        return cls(
            max_inflight=settings.max_inflight,
            max_concurrent_per_key=settings.max_concurrent_per_key,
            model_share_per_key=settings.model_share_per_key,
            body_timeout_s=settings.body_timeout_s,
            request_timeout_s=settings.request_timeout_s,
        )
