"""How long the validator takes on hostile megabyte inputs (a script).

    .venv/bin/python tests/bench/hostile_input_bench.py [--target-ms 1000]

The unit tests (tests/validator/test_hostile.py, test_compile_regex.py) only check that
these inputs are rejected, with a hang guard; the time they take is measured here, where a
loaded machine cannot fail a test: catastrophic-backtracking patterns and format checks on
1 MiB strings, each best of 3, marked ``MISS`` above the target.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import validator
from tests.validator.test_hostile import ADVERSARIAL
from validator._regex import searcher

FORMATS = ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"]
FORMAT_TEXTS = {
    "a*1M": "a" * (1 << 20),
    "1*1M": "1" * (1 << 20),
    "P1*1MD": "P" + "1" * (1 << 20) + "D",
    "a.*512k": "a@" + "a." * (1 << 19),
}
FAST_PATH = ["^[a-z]+[0-9]$", "^\\w+@\\w+$", "^[^@]+@[^@]+$", "^a*b"]


def best_of_3(call: Callable[[str], object], text: str) -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        call(text)
        times.append(time.perf_counter() - started)
    return min(times)


def row(name: str, seconds: float, target_ms: float) -> bool:
    ok = seconds * 1000 <= target_ms
    print(f"{name:<48} {seconds * 1000:9.1f} ms  {'ok' if ok else 'MISS'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-ms", type=float, default=1000.0)
    target = parser.parse_args().target_ms
    results = []
    for pattern, text in ADVERSARIAL:
        compiled = validator.compile({"type": "string", "pattern": pattern})
        results.append(row(f"pattern {pattern}", best_of_3(compiled.validate, text), target))
    fast_text = "a" * (1 << 20) + "!"
    for pattern in FAST_PATH:
        search = searcher(pattern)
        results.append(row(f"fast path {pattern}", best_of_3(search, fast_text), target))
    for fmt in FORMATS:
        compiled = validator.compile({"type": "string", "format": fmt})
        for label, text in FORMAT_TEXTS.items():
            results.append(
                row(f"format {fmt} on {label}", best_of_3(compiled.is_valid, text), target)
            )
    print(f"{sum(results)}/{len(results)} within {target:g} ms")


if __name__ == "__main__":
    main()
