"""``record_params``: the INSERT values of a usage row, each of its column's exact type,
whether the record came typed exactly (the fast path) or not (converted)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gateway.usage.base import UsageRecord
from gateway.usage.ledger import FIELDS, record_params

BASE = UsageRecord(
    request_id="req_1",
    key_id=None,
    model="m",
    endpoint="/v1/chat/completions",
    status=200,
    error_code=None,
    streamed=False,
    prompt_tokens=10,
    completion_tokens=5,
    correction_prompt_tokens=0,
    correction_completion_tokens=0,
    schema_retries=0,
    upstream_calls=1,
    latency_ms=1.5,
    started_at=1.0,
    finished_at=2.0,
    estimated=False,
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, {}),
        ({"key_id": "key_a", "error_code": "x"}, {"key_id": "key_a", "error_code": "x"}),
        ({"prompt_tokens": 10.0}, {"prompt_tokens": 10}),  # float count -> int
        ({"started_at": 3}, {"started_at": 3.0}),  # int timestamp -> float
        ({"streamed": 1}, {"streamed": True}),
        ({"status": True}, {"status": 1}),  # a bool is not an int column value
        ({"prompt_tokens": "7"}, {"prompt_tokens": 7}),
    ],
)
def test_values_have_their_column_types(changes: dict[str, Any], expected: dict[str, Any]) -> None:
    for _ in range(2):  # the second call takes the cached fast path when exact
        params = record_params(dataclasses.replace(BASE, **changes))
        want = {**{f: getattr(BASE, f) for f in FIELDS}, **expected}
        assert params == tuple(want[f] for f in FIELDS)
        assert [type(v) for v in params] == [type(want[f]) for f in FIELDS]


@pytest.mark.parametrize("bad", [{"prompt_tokens": "many"}, {"latency_ms": object()}])
def test_uncoercible_value_raises(bad: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        record_params(dataclasses.replace(BASE, **bad))
