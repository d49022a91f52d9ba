"""``items_over`` counts exactly what ``max_input_items`` bounds: its quick count (any
dict, any list) only decides whether the walk that finds the path runs, so the answer is
the same on either side of the limit; and the body-length bound the decode relies on (each
item takes two bytes of the body at least) holds for the tightest JSON."""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

import orjson
import pytest

from gateway.bounds import items_over

NESTED = ("content", "output", "tool_calls")


def reference_count(data: dict[str, Any], keys: tuple[str, ...]) -> int:
    def count(items: list[Any]) -> int:
        total = len(items)
        for item in items:
            if type(item) is dict:
                for name in NESTED:
                    inner = item.get(name)
                    if type(inner) is list:
                        total += count(inner)
        return total

    return sum(count(v) for key in keys if type(v := data.get(key)) is list)


def random_items(rng: random.Random, depth: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(rng.randrange(4)):
        kind = rng.randrange(6)
        if kind == 0:
            out.append("text")
        elif kind == 1:
            out.append([{}])  # a list item: not looked into
        elif kind == 2:
            out.append(OrderedDict(content=[{}, {}]))  # not a dict exactly: not looked into
        elif kind == 3:
            out.append({"content": "a string", "tool_calls": None})
        else:
            item: dict[str, Any] = {"role": "user"}
            if depth < 4:
                for name in rng.sample(NESTED, rng.randrange(3)):
                    item[name] = random_items(rng, depth + 1)
            out.append(item)
    return out


@pytest.mark.parametrize("seed", range(200))
def test_items_over_refuses_exactly_past_the_limit(seed: int) -> None:
    rng = random.Random(seed)
    data = {"messages": random_items(rng, 0), "input": random_items(rng, 0), "other": [1]}
    keys = ("messages", "input")
    total = reference_count(data, keys)
    for limit in range(total + 2):
        over = items_over(data, keys, limit)
        assert (over is None) is (total <= limit), (limit, total, over)


def test_items_over_names_the_first_item_past_the_limit() -> None:
    data = {"messages": [{"content": [{}, {"content": [{}, {}]}]}, {"tool_calls": [{}]}]}
    keys = ("messages",)
    assert items_over(data, keys, 7) is None
    assert items_over(data, keys, 6) == "messages[0].content[1].content[1]"
    assert items_over(data, keys, 4) == "messages[1].tool_calls[0]"  # level by level
    assert items_over(data, keys, 3) == "messages[0].content[1]"
    assert items_over(data, keys, 1) == "messages[1]"
    assert items_over({"messages": [OrderedDict(content=[{}, {}])]}, keys, 1) is None


@pytest.mark.parametrize("n", [1, 2, 5, 40])
def test_each_item_takes_two_bytes_of_the_body(n: int) -> None:
    tightest: list[dict[str, Any]] = [
        {"messages": [0] * n},
        {"messages": [{}] * n},
        {"messages": [{"content": [0] * n}]},
        {"messages": [{"content": [{"content": [0]}] * n}]},
    ]
    for data in tightest:
        assert len(orjson.dumps(data)) > 2 * reference_count(data, ("messages",))
