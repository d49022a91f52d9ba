"""Edge limits: what one hostile or unlucky client can cost the gateway.

- ``EdgeLimits``: the numbers, read from ``Settings`` (``[server]`` / ``SYNTIC_*``).
- ``InflightGate``: a bound on metered requests in flight; one over the bound is refused
  at once with 503 ``overloaded`` and ``retry-after`` instead of queueing without end.

The deadlines these numbers set (the body read, the whole request) are armed by
``gateway.server.deadlines``; header-read timeouts and the header size cap live at the
protocol level (``gateway.server.protocol``), because uvicorn hands the app nothing before
the headers.

Example::

    limits = EdgeLimits.from_settings(settings)
    gate = InflightGate(limits.max_inflight)
    with gate.admit():          # raises Overloaded when full
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from gateway.errors import Overloaded
from gateway.settings import Settings


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    """The per-request bounds the HTTP middleware enforces."""

    max_inflight: int = 512
    body_timeout_s: float = 30.0
    request_timeout_s: float = 120.0

    @classmethod
    def from_settings(cls, settings: Settings) -> EdgeLimits:
        return cls(
            max_inflight=settings.max_inflight,
            body_timeout_s=settings.body_timeout_s,
            request_timeout_s=settings.request_timeout_s,
        )


class InflightGate:
    """Counts admitted requests; ``admit()`` refuses one past ``limit`` (0 = unbounded).

    Single event loop, so a plain counter is enough (no awaits between test and set).
    """

    __slots__ = ("inflight", "limit", "refused")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0
        self.refused = 0

    @contextlib.contextmanager
    def admit(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.inflight -= 1

    def enter(self) -> None:
        """``admit()`` without the context manager, for the per-request path (no generator
        per request): the caller must call ``leave()`` exactly once after a successful
        ``enter()``."""
        if self.limit and self.inflight >= self.limit:
            self.refused += 1
            raise Overloaded(
                "The gateway is handling too many requests; retry shortly.",
                headers={"retry-after": "1"},
            )
        self.inflight += 1

    def leave(self) -> None:
        self.inflight -= 1
