"""``LineSplitter`` splits streamed text exactly like httpx's ``aiter_lines`` (the SSE
reader of the upstream adapters relies on it), however the text is chunked."""

from __future__ import annotations

import pytest
from httpx._decoders import LineDecoder  # the reference behaviour
from hypothesis import given
from hypothesis import strategies as st

from gateway.upstream.lines import LineSplitter


def _split(chunks: list[str]) -> list[str]:
    s = LineSplitter()
    out = [line for c in chunks for line in s.feed(c)]
    return out + s.flush()


def _reference(chunks: list[str]) -> list[str]:
    d = LineDecoder()
    out = [line for c in chunks for line in d.decode(c)]
    return out + d.flush()


@pytest.mark.parametrize(
    ("chunks", "lines"),
    [
        (["data: {}\n\n"], ["data: {}", ""]),
        (["data: a\r", "\ndata: b\r\n\r\n"], ["data: a", "data: b", ""]),
        (["da", "ta: x", "\n"], ["data: x"]),
        (["no newline at the end"], ["no newline at the end"]),
        (["a\rb\rc"], ["a", "b", "c"]),
        ([], []),
    ],
)
def test_known_splits(chunks: list[str], lines: list[str]) -> None:
    assert _split(chunks) == lines == _reference(chunks)


@given(st.lists(st.text(alphabet=st.sampled_from(list("ab:\r\n \u2028")), max_size=12),
                max_size=12))
def test_same_as_httpx_for_any_chunking(chunks: list[str]) -> None:
    assert _split(chunks) == _reference(chunks)
