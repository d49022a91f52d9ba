"""The shared compiled-schema cache: keys, counters, LRU bound, single-flight, async."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from unittest import mock

import orjson
import pytest

import validator
from validator import _compile


def _fresh(**extra: Any) -> dict[str, Any]:
    """A schema no other test has compiled (unique title), so the first compile is a miss."""
    return {"type": "object", "title": uuid.uuid4().hex, **extra}


def _delta(before: validator.CacheStats) -> tuple[int, int, int]:
    now = validator.cache_stats()
    return now.hits - before.hits, now.misses - before.misses, now.evictions - before.evictions


@pytest.fixture(autouse=True)
def _restore_size() -> Iterator[None]:
    # Room first: a cache other tests filled would evict during these counts.
    validator.configure_cache(1)
    validator.configure_cache(_compile.DEFAULT_MAXSIZE, max_bytes=validator.DEFAULT_CACHE_MAX_BYTES)
    yield
    validator.configure_cache(_compile.DEFAULT_MAXSIZE, max_bytes=validator.DEFAULT_CACHE_MAX_BYTES)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"type": "string", "maxLength": 3}, {"maxLength": 3, "type": "string"}, True),
        (
            {"properties": {"x": {"type": "integer"}, "y": {"type": "null"}}},
            {"properties": {"y": {"type": "null"}, "x": {"type": "integer"}}},
            True,
        ),
        ({"enum": ["a", "b"]}, {"enum": ["b", "a"]}, False),  # array order is meaningful
        ({"const": 1}, {"const": 1.0}, False),  # allowed to differ, must not crash
        ({"type": "string"}, {"type": "integer"}, False),
    ],
)
def test_canonical_key(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    assert (validator.canonical_key(a) == validator.canonical_key(b)) is same
    assert validator.compile(a).key == validator.canonical_key(a)
    assert (validator.canonical_json(a) == validator.canonical_json(b)) is same
    assert validator.compile(a).canonical_json == validator.canonical_json(a)


def test_canonical_json_is_what_the_key_digests() -> None:
    big = {"type": "integer", "maximum": 2**70}  # past orjson's 64 bits: the stdlib path
    for schema in ({"type": "string", "maxLength": 3}, big):
        text = validator.canonical_json(schema)
        assert validator.canonical_key(schema) == hashlib.sha256(text).hexdigest()
    assert validator.canonical_json(big) == b'{"maximum":1180591620717411303424,"type":"integer"}'


def test_key_order_hits_the_same_entry() -> None:
    title = uuid.uuid4().hex
    first = validator.compile({"title": title, "type": "string", "minLength": 1})
    before = validator.cache_stats()
    second = validator.compile({"minLength": 1, "type": "string", "title": title})
    assert second is first
    assert _delta(before) == (1, 0, 0)


def test_hit_miss_counters() -> None:
    schema = _fresh()
    before = validator.cache_stats()
    validator.compile(schema)
    validator.compile(schema)
    validator.compile(dict(schema))
    assert _delta(before) == (2, 1, 0)


def test_lru_bound_and_evictions() -> None:
    validator.configure_cache(3)
    schemas = [_fresh() for _ in range(4)]
    for s in schemas[:3]:
        validator.compile(s)
    validator.compile(schemas[0])  # most recently used now; schemas[1] is the oldest
    before = validator.cache_stats()
    validator.compile(schemas[3])
    assert _delta(before) == (0, 1, 1)
    assert validator.cache_stats().size == 3
    assert validator.cache_stats().maxsize == 3
    before = validator.cache_stats()
    validator.compile(schemas[0])  # still cached
    validator.compile(schemas[1])  # evicted: compiled again
    assert _delta(before)[:2] == (1, 1)


def test_configure_cache_shrinks_and_validates() -> None:
    for _ in range(5):
        validator.compile(_fresh())
    validator.configure_cache(2)
    assert validator.cache_stats().size <= 2
    with pytest.raises(ValueError):
        validator.configure_cache(0)


def test_schema_errors_are_not_cached() -> None:
    bad = {"type": "object", "title": uuid.uuid4().hex, "not": {}}
    before = validator.cache_stats()
    for _ in range(2):
        with pytest.raises(validator.SchemaError):
            validator.compile(bad)
    assert _delta(before) == (0, 2, 0)
    assert validator.canonical_key(bad) not in _compile._CACHE.data


def _slow_build(delay: float) -> Any:
    real = _compile._build
    calls: list[str] = []

    def build(key: str, text: bytes, **flags: bool) -> Any:
        calls.append(key)
        time.sleep(delay)
        return real(key, text, **flags)

    return mock.patch.object(_compile, "_build", build), calls


def test_single_flight_across_threads() -> None:
    schema = _fresh()
    patch, calls = _slow_build(0.2)
    results: list[validator.CompiledSchema] = []
    with patch:
        before = validator.cache_stats()
        threads = [
            threading.Thread(target=lambda: results.append(validator.compile(schema)))
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert _delta(before) == (7, 1, 0)


async def test_single_flight_across_tasks_and_loop_stays_free() -> None:
    schema = _fresh()
    patch, calls = _slow_build(0.3)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    with patch:
        before = validator.cache_stats()
        beat = asyncio.create_task(ticker())
        results = await asyncio.gather(*(validator.compile_async(schema) for _ in range(10)))
        beat.cancel()
    assert len(calls) == 1
    assert all(r is results[0] for r in results)
    assert _delta(before) == (9, 1, 0)
    assert ticks >= 10  # the loop kept running during the 0.3 s compilation


async def test_compile_async_hit_and_error() -> None:
    schema = _fresh()
    first = await validator.compile_async(schema)
    assert await validator.compile_async(schema) is first
    with pytest.raises(validator.SchemaError):
        await validator.compile_async({"title": uuid.uuid4().hex, "not": {}})


async def test_thread_and_task_share_one_flight() -> None:
    schema = _fresh()
    patch, calls = _slow_build(0.3)
    with patch:
        thread_result: list[validator.CompiledSchema] = []
        worker = threading.Thread(target=lambda: thread_result.append(validator.compile(schema)))
        worker.start()
        await asyncio.sleep(0.05)
        compiled = await validator.compile_async(schema)
        await asyncio.to_thread(worker.join)
    assert len(calls) == 1
    assert thread_result == [compiled]


def test_compiled_schema_is_a_private_copy() -> None:
    schema = _fresh(properties={"n": {"type": "integer"}})
    compiled = validator.compile(schema)
    schema["properties"]["n"]["type"] = "string"  # the caller mutates their object
    assert compiled.validate({"n": 1}) == []
    copy = compiled.schema
    copy["properties"]["n"]["type"] = "string"  # and the copy they got back
    assert compiled.schema["properties"]["n"]["type"] == "integer"
    assert compiled.schema is not schema


def _sized(n: int) -> dict[str, Any]:
    """A new schema of ``n`` string properties (its canonical JSON grows with ``n``)."""
    return _fresh(properties={f"p{i}": {"type": "string"} for i in range(n)})


def test_byte_bound_evicts_least_recently_used() -> None:
    validator.configure_cache(1)  # only what this test compiles from here on
    first = validator.compile(_sized(40))
    size = first.schema_bytes
    assert size == len(orjson.dumps(first.schema, option=orjson.OPT_SORT_KEYS))
    validator.configure_cache(1024, max_bytes=3 * size + size // 2)  # room for three
    second = validator.compile(_sized(40))
    third = validator.compile(_sized(40))
    assert validator.compile(first.schema) is first  # used: now the most recent
    before = validator.cache_stats()
    fourth = validator.compile(_sized(40))  # over the budget: ``second`` goes, not ``first``
    stats = validator.cache_stats()
    assert stats.evictions - before.evictions == 1
    assert stats.bytes == sum(c.schema_bytes for c in (first, third, fourth))
    assert stats.bytes <= stats.max_bytes == 3 * size + size // 2
    before = validator.cache_stats()
    assert validator.compile(second.schema) is not second  # it was evicted: compiled again
    assert validator.compile(first.schema) is first
    assert _delta(before)[:2] == (1, 1)


def test_schema_over_the_byte_bound_is_kept_alone() -> None:
    validator.configure_cache(1024, max_bytes=64)  # other tests' entries go too
    small = validator.compile(_fresh())
    big = validator.compile(_sized(20))
    assert big.schema_bytes > 64
    stats = validator.cache_stats()
    assert (stats.size, stats.bytes) == (1, big.schema_bytes)  # only the newest, whole
    assert validator.compile(big.schema) is big
    assert validator.compile(small.schema) is not small


def test_configure_cache_checks_and_applies_the_byte_bound() -> None:
    for _ in range(4):
        validator.compile(_sized(30))
    before = validator.cache_stats()
    assert before.bytes > 0
    validator.configure_cache(1024, max_bytes=1)
    after = validator.cache_stats()
    assert after.size == 1 and after.evictions > before.evictions
    validator.configure_cache(512)  # max_bytes unchanged when not given
    assert validator.cache_stats().max_bytes == 1
    with pytest.raises(ValueError, match="max_bytes"):
        validator.configure_cache(10, max_bytes=0)
