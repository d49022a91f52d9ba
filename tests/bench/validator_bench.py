"""Validator benchmark (a script, not collected by pytest).

    .venv/bin/python tests/bench/validator_bench.py

Prints, for the spec's ``create_refund`` schema and a ~50-property nested schema with
``$defs``: cache-hit validate time (valid instance), compile time (cache miss),
``canonical_key`` time, the cache-hit ``compile()`` lookup time, and the same validation
through ``jsonschema`` (Draft 2020-12, validator object reused) for comparison.
Targets: validate <= 2 us (create_refund), <= 60 us (50-property), >= 10x
faster than jsonschema.

Then a 240 KiB, 1,000-property schema (a cache miss must not stall other
requests): compile time, the longest single ``compile()`` of generated code (it holds the
GIL), GC-tracked objects a cached copy adds, a full collection with 12 cached, and the
worst lateness of a 5 ms ticker thread while another thread compiles.
"""

from __future__ import annotations

import builtins
import gc
import itertools
import threading
import time
import timeit
from collections.abc import Callable
from typing import Any

import jsonschema  # type: ignore[import-untyped]

import validator
from validator import _codegen

CREATE_REFUND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
        "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
        "note": {"type": ["string", "null"], "maxLength": 200},
    },
    "required": ["order_number", "amount_pence", "reason", "note"],
    "additionalProperties": False,
}
REFUND_OK = {"order_number": "123456", "amount_pence": 1250, "reason": "damaged", "note": None}


def _closed(props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def fifty_property_schema() -> dict[str, Any]:
    """10 top-level fields + 4 nested objects/arrays via $defs: ~50 properties in all."""
    address = _closed(
        {
            "line1": {"type": "string", "maxLength": 100},
            "line2": {"type": ["string", "null"], "maxLength": 100},
            "city": {"type": "string", "minLength": 1},
            "postcode": {"type": "string", "pattern": "^[A-Z0-9 ]{5,8}$"},
            "country": {"type": "string", "enum": ["GB", "IE", "FR", "DE", "US"]},
        }
    )
    item = _closed(
        {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
            "unit_pence": {"type": "integer", "minimum": 0},
            "gift": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        }
    )
    contact = _closed(
        {
            "name": {"type": "string"},
            "email": {"type": "string", "format": "email"},
            "phone": {"type": ["string", "null"]},
            "marketing": {"type": "boolean"},
            "address": {"$ref": "#/$defs/address"},
        }
    )
    top: dict[str, Any] = {f"field_{i}": {"type": ["string", "integer", "null"]} for i in range(10)}
    top.update(
        {
            "order_id": {"type": "string", "format": "uuid"},
            "placed_at": {"type": "string", "format": "date-time"},
            "customer": {"$ref": "#/$defs/contact"},
            "billing": {"$ref": "#/$defs/address"},
            "shipping": {"anyOf": [{"$ref": "#/$defs/address"}, {"type": "null"}]},
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
            "total_pence": {"type": "integer", "minimum": 0},
            "currency": {"const": "GBP"},
            "channel": {"type": "string", "enum": ["web", "app", "phone"]},
            "notes": {"type": ["string", "null"], "maxLength": 500},
        }
    )
    schema = _closed(top)
    schema["$defs"] = {"address": address, "item": item, "contact": contact}
    return schema


def fifty_property_instance() -> dict[str, Any]:
    address = {
        "line1": "1 High St",
        "line2": None,
        "city": "Leeds",
        "postcode": "LS1 4AB",
        "country": "GB",
    }
    item = {"sku": "ABC-1234", "quantity": 2, "unit_pence": 499, "gift": False, "tags": ["x"]}
    instance: dict[str, Any] = {f"field_{i}": (i if i % 2 else f"v{i}") for i in range(10)}
    instance.update(
        {
            "order_id": "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
            "placed_at": "2026-11-30T10:30:00Z",
            "customer": {
                "name": "Ann",
                "email": "ann@example.com",
                "phone": None,
                "marketing": True,
                "address": address,
            },
            "billing": address,
            "shipping": None,
            "items": [item, dict(item, sku="XYZ-0001")],
            "total_pence": 1497,
            "currency": "GBP",
            "channel": "web",
            "notes": None,
        }
    )
    return instance


def per_call(fn: Callable[[], Any], budget_s: float = 0.4) -> float:
    """Best-of-5 seconds per call."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(1, int(number * budget_s / 0.2))
    return min(timer.repeat(repeat=5, number=number)) / number


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:9.2f} us"


def bench(name: str, schema: dict[str, Any], instance: Any, target_us: float) -> None:
    validator.configure_cache(1024)
    compiled = validator.compile(schema)
    assert compiled.validate(instance) == [], compiled.validate(instance)
    checker = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    assert checker.is_valid(instance)

    fresh = itertools.count()

    def compile_miss() -> None:
        validator.compile({**schema, "title": f"bench-{next(fresh)}"})  # a new key every time

    validate = per_call(lambda: compiled.validate(instance))
    is_valid = per_call(lambda: compiled.is_valid(instance))
    js = per_call(lambda: checker.is_valid(instance), budget_s=0.2)
    key = per_call(lambda: validator.canonical_key(schema))
    hit = per_call(lambda: validator.compile(schema))
    miss = per_call(compile_miss, budget_s=0.3)
    verdict = "OK" if validate * 1e6 <= target_us and js / validate >= 10 else "MISSED"
    print(f"{name}")
    print(f"  validate (cached, valid)   {_us(validate)}   target <= {target_us} us  [{verdict}]")
    print(f"  is_valid (cached, valid)   {_us(is_valid)}")
    print(f"  jsonschema is_valid        {_us(js)}   ({js / validate:.0f}x slower than validate)")
    print(f"  canonical_key              {_us(key)}")
    print(f"  compile() cache hit        {_us(hit)}   (canonical_key + LRU lookup)")
    print(f"  compile() cache miss       {_us(miss)}   (lint + build + codegen)")


def large_schema(seed: int, width: int = 1000) -> dict[str, Any]:
    """The security test's schema near the limits (~240 KiB for width 1000)."""
    props = {
        f"p{seed}_{i}": _closed(
            {
                "s": {
                    "type": "string",
                    "pattern": f"^[a-z]{{1,{i % 7 + 1}}}[0-9]*$",
                    "maxLength": 64,
                },
                "n": {"type": ["integer", "null"], "minimum": i},
                "e": {"enum": [f"v{i}", "w"]} if i % 10 == 0 else {"type": "boolean"},
            }
        )
        for i in range(width)
    }
    return _closed(props)


def _tracked() -> int:
    for _ in range(3):
        gc.collect()
    return len(gc.get_objects())


def bench_large() -> None:
    seeds = itertools.count(time.time_ns() % 90_000)  # new schemas; 5-digit names as in the test
    calls: list[float] = []

    def timed_compile(source: str, *args: Any) -> Any:
        start = time.perf_counter()
        code = builtins.compile(source, *args)
        calls.append(time.perf_counter() - start)
        return code

    validator.configure_cache(1)  # empty the cache: nothing evicted while counting
    validator.configure_cache(1024)
    gc.collect()
    gc.freeze()  # count and collect only what the large schemas add
    _codegen.compile = timed_compile  # type: ignore[attr-defined]
    try:
        before = _tracked()
        start = time.perf_counter()
        compiled = validator.compile(large_schema(next(seeds)))
        took = time.perf_counter() - start
        added = _tracked() - before
    finally:
        del _codegen.compile  # type: ignore[attr-defined]
    kept = [compiled] + [validator.compile(large_schema(next(seeds))) for _ in range(11)]
    start = time.perf_counter()
    gc.collect()
    full_gc = time.perf_counter() - start
    gc.unfreeze()

    lateness: list[float] = []
    done = threading.Event()

    def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            time.sleep(0.005)
            lateness.append(time.perf_counter() - start - 0.005)

    thread = threading.Thread(target=ticker)
    thread.start()
    for _ in range(2):
        validator.compile(large_schema(next(seeds)))
    done.set()
    thread.join()
    print(f"240 KiB schema, 1,000 properties (cache miss; {len(kept)} kept cached)")
    print(f"  compile() cache miss       {took * 1e3:9.1f} ms")
    print(f"  generated code compiled in {len(calls)} calls, longest {max(calls) * 1e3:.2f} ms")
    print(f"  GC-tracked objects added   {added:9d}")
    print(f"  full gc.collect(), 12 cached {full_gc * 1e3:7.1f} ms   (rest of the heap frozen)")
    print(f"  5 ms ticker thread lateness while compiling: worst {max(lateness) * 1e3:.1f} ms")


def main() -> None:
    bench("create_refund (spec example)", CREATE_REFUND, REFUND_OK, 2.0)
    big = fifty_property_schema()
    bench("50-property nested schema with $defs", big, fifty_property_instance(), 60.0)
    bench_large()


if __name__ == "__main__":
    main()
