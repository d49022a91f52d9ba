"""A streamed answer's body -> SSE lines, bounded and strictly decoded.

Lines end at CR LF, LF or CR (the SSE grammar; nothing else, so a U+2028 inside a JSON
string stays in its line). Each line is decoded as strict UTF-8: a stream the gateway would
otherwise repair with U+FFFD is refused, as the same bytes are when not streamed. Bounds:
one line and one event (the lines up to a blank one) at most ``max_event_bytes``, the whole
body at most ``max_bytes``; past either, reading stops with ``OutputTooLarge``.

``sse_events`` is the one SSE event parser every upstream wire reads its stream with: lines
-> ``(event name, data)``, the data lines of one event joined with LF and dispatched at the
blank line that ends it (the WHATWG rules, and what the openai and anthropic SDKs' own
decoders do).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from gateway.upstream.errors import OutputTooLarge, UpstreamInvalidResponse

__all__ = ["sse_events", "sse_lines"]


def _decode(line: bytes) -> str:
    try:
        return line.decode()
    except UnicodeDecodeError:
        raise UpstreamInvalidResponse("The upstream stream is not valid UTF-8.") from None


def _event_too_large(limit: int) -> OutputTooLarge:
    return OutputTooLarge(f"An upstream stream event exceeds the {limit} byte limit.")


async def sse_lines(
    read: Callable[[], Awaitable[bytes]], *, max_event_bytes: int, max_bytes: int
) -> AsyncIterator[str]:
    """The lines of the body that ``read()`` returns piece by piece (b"" at its end)."""
    pending = b""
    total = 0
    event = 0
    while chunk := await read():
        total += len(chunk)
        if total > max_bytes:
            raise OutputTooLarge(f"The upstream stream exceeds the {max_bytes} byte limit.")
        data = pending + chunk if pending else chunk
        lines = data.splitlines(keepends=True)
        last = lines[-1]
        # Unterminated, or ending in a CR that may be the first half of a CR LF: the rest
        # comes with the next piece.
        pending = b"" if last[-1:] == b"\n" else lines.pop()
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            event = event + len(raw) if line else 0
            if event > max_event_bytes:
                raise _event_too_large(max_event_bytes)
            yield _decode(line)
        if event + len(pending) > max_event_bytes:
            raise _event_too_large(max_event_bytes)
    if pending:
        yield _decode(pending.rstrip(b"\r\n"))


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """``(event name, data)`` pairs from SSE lines (``message`` when unnamed); comments,
    ``id:`` and ``retry:`` lines and events without data are skipped."""
    name = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield name or "message", "\n".join(data)
            name, data = "", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield name or "message", "\n".join(data)
