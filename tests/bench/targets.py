"""The benchmark's targets (``docs/performance.md``) and the verdict of one run on them.

``TARGETS`` are absolute, for an idle machine; ``PEER_TARGETS`` are CPU per request as
ratios of medians over alternating rounds (``--compare-peers``), for each request the
peers are compared on. A target the run did not measure is listed, not counted as missed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    key: str  # the figure's key in a run's figures
    limit: float
    at_most: bool  # True: the figure must be <= limit; False: >= limit
    unit: str

    @property
    def bound(self) -> str:
        return f"{'<=' if self.at_most else '>='} {self.limit:g} {self.unit}"


TARGETS: tuple[Target, ...] = (
    Target("json c32 throughput", "rps32", 5000, False, "req/s"),
    Target("json c32 server CPU per request", "cpu32", 200, True, "us"),
    Target("json c1 added p50", "added1", 0.25, True, "ms"),
    Target("strict SSE added time to first byte", "ttfb", 0.3, True, "ms"),
    Target("CPU per extra SSE event", "sse_event", 25, True, "us"),
    Target("throughput vs LiteLLM (ratio of medians)", "litellm", 40, False, "x"),
    Target("RSS, largest of the gateway's rows", "rss", 80, True, "MB"),
    Target("stall: worst hot request, added by new schemas", "stall", 20, True, "ms"),
)

# The peer workloads (``peers.Workload.name``) and how the report names them.
PEER_WORKLOADS = {"small": "small request", "agent": "agent-sized request"}

# CPU per request, c32, ratios of the medians (docs/decisions/0025): the pass-through is the
# one with the durable record; each holds for the small request and the agent-sized one.
PEER_TARGETS: tuple[Target, ...] = tuple(
    t
    for w, title in PEER_WORKLOADS.items()
    for t in (
        Target(
            f"CPU per request, syntic / pass-through with a durable record, {title}",
            f"{w}:vs_baseline",
            1.5,
            True,
            "x",
        ),
        Target(f"CPU per request, Portkey / syntic, {title}", f"{w}:vs_portkey", 3, False, "x"),
        Target(f"CPU per request, LiteLLM / syntic, {title}", f"{w}:vs_litellm", 30, False, "x"),
    )
)


@dataclass(frozen=True, slots=True)
class Verdict:
    target: Target
    value: float | None  # None: not measured in this run

    @property
    def ok(self) -> bool | None:
        if self.value is None:
            return None
        return (
            self.value <= self.target.limit
            if self.target.at_most
            else self.value >= self.target.limit
        )

    def line(self) -> str:
        t = self.target
        if self.value is None:
            return f"  {t.name}: not measured in this run (target {t.bound})"
        shown = f"{self.value:,.0f}" if abs(self.value) >= 100 else f"{self.value:.2f}"
        return f"  {'ok  ' if self.ok else 'MISS'} {t.name}: {shown} {t.unit} (target {t.bound})"

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.target.name,
            "key": self.target.key,
            "limit": self.target.limit,
            "at_most": self.target.at_most,
            "unit": self.target.unit,
            "value": self.value,
            "ok": self.ok,
        }


def judge(figures: dict[str, float]) -> tuple[list[Verdict], list[Verdict]]:
    """The absolute and the peer verdicts for a run's figures."""
    return (
        [Verdict(t, figures.get(t.key)) for t in TARGETS],
        [Verdict(t, figures.get(t.key)) for t in PEER_TARGETS],
    )


def verdict_lines(verdicts: tuple[list[Verdict], list[Verdict]]) -> tuple[list[str], int]:
    """The lines to print and how many measured targets were missed."""
    lines: list[str] = []
    missed = 0
    for title, group in zip(("targets:", "targets (peers):"), verdicts, strict=True):
        lines.append(title)
        lines.extend(v.line() for v in group)
        missed += sum(v.ok is False for v in group)
    return lines, missed
