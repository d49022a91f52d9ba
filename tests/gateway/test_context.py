"""The request's running totals: the sums a tally keeps are the sums of its calls."""

from __future__ import annotations

import pytest

from gateway.canonical import Members, Usage
from gateway.context import Tally

USAGES = [
    Usage(),
    Usage(12, 3),
    Usage(40, 9, cache_read_tokens=8, cache_creation_tokens=2, reasoning_tokens=4),
    Usage(5, 1, estimated=True),
    Usage(7, 2, kept=Members("anthropic", {"service_tier": "standard", "n": 1})),
]


@pytest.mark.parametrize("first", USAGES)
@pytest.mark.parametrize("corrections", [[], [USAGES[1]], [USAGES[3], USAGES[4]]])
def test_a_tally_sums_as_usage_addition_does(first: Usage, corrections: list[Usage]) -> None:
    """The first attempt alone, or with corrections: the same totals as adding the
    calls' usage from zero (the first call's own usage is kept when it is the only one)."""
    tally = Tally()
    tally.add_first(first)
    for usage in corrections:
        tally.add_correction(usage)
    assert tally.first_usage == Usage() + first
    fix = Usage()
    for usage in corrections:
        fix = fix + usage
    assert tally.correction_usage == fix
    assert tally.total == (Usage() + first) + fix
    assert tally.retries == len(corrections)
    assert tally.upstream_calls == 1 + len(corrections)


def test_a_second_first_attempt_adds_to_the_first() -> None:
    tally = Tally()
    tally.add_first(USAGES[1])
    tally.add_first(USAGES[2])
    assert tally.first_usage == USAGES[1] + USAGES[2]
    assert tally.total == USAGES[1] + USAGES[2]
