"""``sse_lines``: a streamed body split into SSE lines (CR LF, LF or CR, nothing else),
however it is chunked, strictly decoded and bounded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.upstream.errors import OutputTooLarge, UpstreamInvalidResponse
from gateway.upstream.lines import sse_lines

BIG = 1 << 30


def _reader(chunks: list[bytes]) -> Callable[[], Awaitable[bytes]]:
    pieces = iter([*chunks, b""])

    async def read() -> bytes:
        return next(pieces)

    return read


async def _lines(chunks: list[bytes], *, event: int = BIG, total: int = BIG) -> list[str]:
    return [
        line async for line in sse_lines(_reader(chunks), max_event_bytes=event, max_bytes=total)
    ]


def _reference(body: bytes) -> list[str]:
    # bytes.splitlines splits on exactly the SSE line ends: CR LF, LF, CR.
    return [line.decode() for line in body.splitlines()]


@pytest.mark.parametrize(
    ("chunks", "lines"),
    [
        ([b"data: {}\n\n"], ["data: {}", ""]),
        ([b"data: a\r", b"\ndata: b\r\n\r\n"], ["data: a", "data: b", ""]),
        ([b"data: a\r", b"data: b\r"], ["data: a", "data: b"]),
        ([b"data: \xe2\x80", b"\xa8x\n"], ["data: \u2028x"]),  # U+2028 is not a line end
        ([b"data: no newline at the end"], ["data: no newline at the end"]),
    ],
    ids=["lf", "crlf-split", "cr", "u2028-split", "unterminated"],
)
async def test_line_ends(chunks: list[bytes], lines: list[str]) -> None:
    assert await _lines(chunks) == lines


@given(
    st.lists(
        st.sampled_from(["data: x", 'data: {"a": "\u2028é"}', "", ": ping", "event: e"]),
        max_size=12,
    ),
    st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=12, max_size=12),
    st.lists(st.integers(min_value=1, max_value=7), max_size=40),
)
async def test_any_chunking_gives_the_same_lines(
    texts: list[str], ends: list[str], cuts: list[int]
) -> None:
    body = "".join(t + e for t, e in zip(texts, ends, strict=False)).encode()
    chunks, at = [], 0
    for size in cuts:
        if at < len(body):
            chunks.append(body[at : at + size])
            at += size
    if at < len(body):
        chunks.append(body[at:])
    assert await _lines(chunks) == _reference(body)


async def test_invalid_utf8_is_refused_not_repaired() -> None:
    with pytest.raises(UpstreamInvalidResponse, match="UTF-8"):
        await _lines([b'data: {"a": "\xff"}\n'])


@pytest.mark.parametrize(
    "chunks",
    [
        [b"data: " + b"x" * 100],  # one line that never ends
        [b"data: " + b"x" * 60 + b"\n", b"data: " + b"x" * 60 + b"\n"],  # one long event
    ],
    ids=["line", "event"],
)
async def test_an_event_over_its_cap_stops_reading(chunks: list[bytes]) -> None:
    with pytest.raises(OutputTooLarge, match="event exceeds the 100 byte"):
        await _lines(chunks, event=100)


async def test_events_under_the_cap_pass_however_many() -> None:
    events = [b"data: " + b"x" * 60 + b"\n\n"] * 50
    assert len(await _lines(events, event=100)) == 100


async def test_the_whole_stream_over_its_cap_stops_reading() -> None:
    with pytest.raises(OutputTooLarge, match="stream exceeds the 1000 byte"):
        await _lines([b"data: x\n\n"] * 200, total=1000)
