"""Text -> lines exactly as ``httpx.Response.aiter_lines`` splits them (SSE bodies read
straight from the aiohttp pool by ``gateway.upstream.transport``)."""

from __future__ import annotations

__all__ = ["LineSplitter"]

_NEWLINES = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits on


class LineSplitter:
    """Feed decoded text as it arrives; a CR LF split across two feeds is one break."""

    __slots__ = ("buffer", "trailing_cr")

    def __init__(self) -> None:
        self.buffer: list[str] = []
        self.trailing_cr = False

    def feed(self, text: str) -> list[str]:
        if self.trailing_cr:
            text = "\r" + text
            self.trailing_cr = False
        if text.endswith("\r"):
            self.trailing_cr = True
            text = text[:-1]
        if not text:
            return []
        trailing_newline = text[-1] in _NEWLINES
        lines = text.splitlines()
        if len(lines) == 1 and not trailing_newline:
            self.buffer.append(lines[0])
            return []
        if self.buffer:
            lines[0] = "".join(self.buffer) + lines[0]
            self.buffer = []
        if not trailing_newline:
            self.buffer = [lines.pop()]
        return lines

    def flush(self) -> list[str]:
        if not self.buffer and not self.trailing_cr:
            return []
        lines = ["".join(self.buffer)]
        self.buffer = []
        self.trailing_cr = False
        return lines
