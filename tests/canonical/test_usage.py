"""``Usage.__add__``: a zero side gives the other back, equal to the field-wise sum."""

from __future__ import annotations

import pytest

from gateway.canonical import Usage
from gateway.canonical.model import Members

_SIDES = [
    Usage(),
    Usage(3, 4),
    Usage(0, 0, estimated=True),
    Usage(1, 2, 3, 4, 5, estimated=True, kept=Members("openai", {"audio": 1})),
    Usage(kept=Members("anthropic", {"service_tier": "standard"})),
]


def _fieldwise(a: Usage, b: Usage) -> Usage:
    kept = a.kept or b.kept
    if a.kept is not None and b.kept is not None and a.kept.wire == b.kept.wire:
        kept = Members(a.kept.wire, {**a.kept.fields, **b.kept.fields})
    return Usage(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.cache_read_tokens + b.cache_read_tokens,
        a.cache_creation_tokens + b.cache_creation_tokens,
        a.reasoning_tokens + b.reasoning_tokens,
        a.estimated or b.estimated,
        kept,
    )


@pytest.mark.parametrize("usage", _SIDES)
def test_a_zero_side_gives_the_field_wise_sum(usage: Usage) -> None:
    assert Usage() + usage == _fieldwise(Usage(), usage) == usage
    assert usage + Usage() == _fieldwise(usage, Usage()) == usage


def test_two_non_zero_sides_are_summed() -> None:
    a = Usage(1, 2, 3, 4, 5, kept=Members("openai", {"audio": 1}))
    b = Usage(10, 20, estimated=True, kept=Members("openai", {"audio": 2}))
    assert a + b == Usage(11, 22, 3, 4, 5, True, Members("openai", {"audio": 3}))
