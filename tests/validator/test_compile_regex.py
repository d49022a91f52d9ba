"""``pattern`` support: RE2 acceptance, ECMA escapes, and the fast path's equivalence."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from validator._fastregex import fast_search
from validator._regex import check_pattern, compile_pattern, searcher


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("^[0-9]{6}$", None),
        ("\\u00e9+", None),
        ("\\p{L}", None),
        ("(a)\\1", "backreferences are not supported"),
        ("(?=a)", "invalid perl operator: (?="),
        ("(?<!a)b", "invalid perl operator: (?<!"),
        ("\\cJ", "control escapes (\\c) are not supported"),
        ("[", "missing ]: ["),
        ("a\\", "pattern ends with a lone backslash"),
        ("x" * 10_001, "pattern is longer than 10000 characters"),
    ],
)
def test_check_pattern(pattern: str, problem: str | None) -> None:
    assert check_pattern(pattern) == problem


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        ("^[0-9]{6}$", "123456", True),
        ("^[0-9]{6}$", "123456\n", False),  # ECMA/RE2 ``$`` is the very end
        ("^[0-9]{6}$", "١٢٣٤٥٦", False),  # \d and [0-9] are ASCII
        ("\\d", "٣", False),
        ("\\u00e9", "café", True),  # ECMA \uXXXX escape
        ("a", "banana", True),  # unanchored search
        ("^(a+)+$", "aaaa", True),
    ],
)
def test_search_semantics(pattern: str, text: str, found: bool) -> None:
    assert (searcher(pattern)(text) is not None) is found
    assert (compile_pattern(pattern).search(text) is not None) is found


@pytest.mark.parametrize(
    ("pattern", "fast"),
    [
        ("^[0-9]{6}$", True),
        ("^[A-Z]{3}-[0-9]{4}$", True),
        ("^\\w+@\\w+$", True),
        ("[0-9]", True),
        ("^(a+)+$", False),  # groups
        ("a+", False),  # unbounded repeat without ^: quadratic on a backtracking engine
        ("^a+a+$", False),  # adjacent overlapping repeats
        ("^a*a$", False),
        ("\\s", False),  # \v is \s in Python, not in RE2
        ("x{,3}", False),  # a repeat in Python, literal text in ECMA/RE2
        ("[[:alpha:]]", False),
        ("a|b", False),
    ],
)
def test_fast_path_eligibility(pattern: str, fast: bool) -> None:
    assert (fast_search(pattern) is not None) is fast


# A hang guard, not a speed check (that is tests/bench/hostile_input_bench.py): backtracking
# on a megabyte would run for hours.
HANG_GUARD_S = 30.0

ATOMS = ["a", "b", "-", "@", "\\.", ".", "[a-c]", "[^a]", "\\d", "\\w", "\\W", "\\D", "é"]
QUANTIFIERS = ["", "", "*", "+", "?", "{2}", "{1,3}", "{2,}"]
patterns = st.builds(
    lambda start, parts, end: start + "".join(parts) + end,
    st.sampled_from(["", "^"]),
    st.lists(
        st.tuples(st.sampled_from(ATOMS), st.sampled_from(QUANTIFIERS)).map("".join), max_size=4
    ),
    st.sampled_from(["", "$"]),
)
texts = st.text(alphabet="ab-@.1\né_", max_size=8)


@settings(max_examples=500, deadline=None)
@given(pattern=patterns, text=texts)
def test_fast_path_agrees_with_re2(pattern: str, text: str) -> None:
    if check_pattern(pattern) is not None:
        return
    assert (searcher(pattern)(text) is None) == (compile_pattern(pattern).search(text) is None)


def test_fast_path_stays_linear_on_hostile_input() -> None:
    text = "a" * (1 << 20) + "!"
    for pattern in ["^[a-z]+[0-9]$", "^\\w+@\\w+$", "^[^@]+@[^@]+$", "^a*b"]:
        assert fast_search(pattern) is not None
        started = time.perf_counter()
        assert searcher(pattern)(text) is None
        assert time.perf_counter() - started < HANG_GUARD_S
