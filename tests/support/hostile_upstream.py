"""A raw-socket OpenAI-compatible upstream that misbehaves on purpose.

HTTP/1.1 on asyncio streams in a thread of its own, written byte by byte so it can send
what no framework would: interim answers, a protocol switch, bodies that trickle or never
end, gzip bombs, invalid UTF-8, resets in the middle of a body. The first path segment picks
the behaviour, so one server serves every mode to one gateway::

    with HostileUpstream() as up:                     # or HostileUpstream(tls=ca_cert)
        model_table("bomb", up.base_url("gzip-bomb"))  # POST /gzip-bomb/v1/chat/completions

A well-behaved answer echoes the request's last user message (``echo: <text>``), so a test
can tell that a request got its own answer and not a neighbour's. Streamed when the request
says ``"stream": true``. Every request is recorded (mode, head, body) and connections are
counted (``accepted``), so tests can see reuse and what was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from tests.support.threaded_server import ThreadedServer

GIB = 1 << 30
_MIB_ZEROS = b"\0" * (1 << 20)
_ZEROS_GIB_CRC = 0x5B64C2B0  # zlib.crc32 of 1 GiB of zero bytes


@dataclass
class Seen:
    mode: str
    head: dict[str, str]
    body: Any


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    request: Seen = field(default_factory=lambda: Seen("", {}, None))


def gzip_bomb(prefix: bytes = b"", zero_mib: int = 1024) -> bytes:
    """A gzip body: ``prefix``, then ``zero_mib`` MiB of zero bytes (~1 KB per MiB).

    Built in a second, not minutes: after a full flush, every MiB of zeros compresses to
    the same bytes, so one block is repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(_MIB_ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    tail = c.flush(zlib.Z_FINISH)
    crc = zlib.crc32(prefix)
    # crc32 over prefix + zeros: combine by continuing over the zeros (1 GiB: precomputed)
    if prefix or zero_mib != 1024:
        for _ in range(zero_mib):
            crc = zlib.crc32(_MIB_ZEROS, crc)
    else:
        crc = _ZEROS_GIB_CRC
    size = (len(prefix) + zero_mib * (1 << 20)) & 0xFFFFFFFF
    return (
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
        + head
        + block * zero_mib
        + tail
        + struct.pack("<II", crc, size)
    )


def _user_text(body: Any) -> str:
    try:
        for message in reversed(body["messages"]):
            if message.get("role") == "user":
                content = message["content"]
                return content if isinstance(content, str) else str(content)
    except (KeyError, TypeError):
        pass
    return ""


def completion(text: str, *, arguments: str | None = None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if arguments is not None:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": arguments},
                }
            ],
        }
    return orjson.dumps(
        {
            "id": "chatcmpl-hostile",
            "object": "chat.completion",
            "created": 1,
            "model": "hostile",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if arguments is not None else "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    )


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = orjson.dumps(
        {
            "id": "chatcmpl-hostile",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "hostile",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )
    return b"data: " + payload + b"\n\n"


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b"0\r\n\r\n"


SSE = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
JSON = {"content-type": "application/json"}


class HostileUpstream:
    """See the module docstring. ``tls``: a server-side ``ssl.SSLContext`` (https)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.accepted = 0
        self.seen: list[Seen] = []
        self._server = ThreadedServer(self._serve, "hostile-upstream", tls=tls, limit=1 << 20)
        self._bombs: dict[bytes, bytes] = {}

    @property
    def port(self) -> int:
        return self._server.port

    # -- lifecycle ---------------------------------------------------------------------

    def base_url(self, mode: str, host: str = "127.0.0.1") -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host}:{self.port}/{mode}/v1"

    def start(self) -> HostileUpstream:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> HostileUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def open_connections(self) -> int:
        return len(self._server.writers)

    def bomb(self, prefix: bytes = b"") -> bytes:
        """The 1 GiB gzip bomb (with ``prefix`` first), built once per prefix."""
        found = self._bombs.get(prefix)
        if found is None:
            found = self._bombs[prefix] = gzip_bomb(prefix)
        return found

    # -- serving -----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        conn = _Conn(reader, writer)
        try:
            while await self._read_request(conn):
                mode = conn.request.mode
                handler = getattr(self, "_mode_" + mode.replace("-", "_"), None)
                if handler is None:
                    writer.write(_head("404 Not Found", {"content-length": "0"}))
                    continue
                if not await handler(conn):
                    break  # the mode left the connection unusable
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(self, conn: _Conn) -> bool:
        try:
            raw = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        lines = raw.decode("latin-1").split("\r\n")
        path = urlsplit(lines[0].split(" ")[1]).path  # origin or absolute form (a proxy's)
        head = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                head[name.strip().lower()] = value.strip()
        body = await conn.reader.readexactly(int(head.get("content-length", "0")))
        try:
            parsed: Any = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        conn.request = Seen(path.strip("/").split("/")[0], head, parsed)
        self.seen.append(conn.request)
        return True

    @staticmethod
    def _streamed(conn: _Conn) -> bool:
        body = conn.request.body
        return isinstance(body, dict) and body.get("stream") is True

    async def _answer(self, conn: _Conn) -> bool:
        """The well-behaved answer: the request's user text echoed, JSON or SSE."""
        text = "echo: " + _user_text(conn.request.body)
        w = conn.writer
        if self._streamed(conn):
            w.write(_head("200 OK", SSE))
            w.write(_chunked(chunk({"role": "assistant", "content": ""})))
            w.write(_chunked(chunk({"content": text})))
            w.write(_chunked(chunk({}, "stop")))
            w.write(_chunked(b"data: [DONE]\n\n"))
            w.write(_chunked(b""))
        else:
            body = completion(text)
            w.write(_head("200 OK", {**JSON, "content-length": str(len(body))}))
            w.write(body)
        return True

    def _reset(self, conn: _Conn) -> bool:
        """Abort with a TCP RST (SO_LINGER 0), not a clean close."""
        sock = conn.writer.get_extra_info("socket")
        if sock is not None and self.tls is None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.writer.transport.abort()
        return False

    # -- modes (path segment ``ok`` -> ``_mode_ok``) -------------------------------------

    async def _mode_ok(self, conn: _Conn) -> bool:
        return await self._answer(conn)

    async def _mode_interim_100(self, conn: _Conn) -> bool:
        conn.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return await self._answer(conn)

    async def _mode_interim_103(self, conn: _Conn) -> bool:
        conn.writer.write(_head("103 Early Hints", {"link": "</style.css>; rel=preload"}))
        conn.writer.write(_head("102 Processing", {}))
        return await self._answer(conn)

    async def _mode_switch_101(self, conn: _Conn) -> bool:
        conn.writer.write(
            _head("101 Switching Protocols", {"upgrade": "websocket", "connection": "Upgrade"})
        )
        conn.writer.write(b"\x81\x05hello" + completion("not for you"))
        await conn.writer.drain()
        await asyncio.sleep(0.2)
        return False

    async def _mode_trickle(self, conn: _Conn) -> bool:
        """A JSON answer one byte every 50 ms: each read is quick, the whole is not."""
        body = completion("echo: " + _user_text(conn.request.body)) + b" " * 4096
        conn.writer.write(_head("200 OK", {**JSON, "content-length": str(len(body))}))
        for byte in body:
            conn.writer.write(bytes([byte]))
            await conn.writer.drain()
            await asyncio.sleep(0.05)
        return True

    async def _mode_endless_stream(self, conn: _Conn) -> bool:
        """Text deltas every 20 ms, for ever (until the client goes)."""
        w = conn.writer
        w.write(_head("200 OK", SSE))
        w.write(_chunked(chunk({"role": "assistant", "content": ""})))
        while True:
            w.write(_chunked(chunk({"content": "la "})))
            await w.drain()
            await asyncio.sleep(0.02)

    async def _mode_gzip_bomb(self, conn: _Conn) -> bool:
        body = self.bomb()
        conn.writer.write(
            _head("200 OK", {**JSON, "content-encoding": "gzip", "content-length": str(len(body))})
        )
        conn.writer.write(body)
        return True

    async def _mode_error_bomb(self, conn: _Conn) -> bool:
        """A 400 whose error body is a gzip bomb: an error message that never ends."""
        body = self.bomb(b'{"error": {"message": "')
        conn.writer.write(
            _head(
                "400 Bad Request",
                {**JSON, "content-encoding": "gzip", "content-length": str(len(body))},
            )
        )
        conn.writer.write(body)
        return True

    async def _mode_error_endless(self, conn: _Conn) -> bool:
        """A 400 whose chunked error body never ends (a key echoed in it, again and
        again); the connection is left for the gateway to drop."""
        w = conn.writer
        w.write(_head("400 Bad Request", {**JSON, "transfer-encoding": "chunked"}))
        w.write(_chunked(b'{"error": {"message": "Incorrect API key provided: '))
        piece = _chunked(b"sk-proj-abcdefghijklmnopqrstuvwxyz " * 64)
        while True:
            w.write(piece)
            await w.drain()
            await asyncio.sleep(0.001)

    async def _mode_gzip_bomb_stream(self, conn: _Conn) -> bool:
        """A stream whose first event is fine, then a gzip bomb of zeros (a line that
        never ends once inflated)."""
        first = chunk({"role": "assistant", "content": "begin "})
        body = self.bomb(first + b"data: ")
        w = conn.writer
        w.write(_head("200 OK", {**SSE, "content-encoding": "gzip"}))
        for at in range(0, len(body), 16384):
            w.write(_chunked(body[at : at + 16384]))
            await w.drain()
        w.write(_chunked(b""))
        return True

    async def _mode_endless_line(self, conn: _Conn) -> bool:
        """A stream line that never ends: up to 512 MiB with no newline."""
        w = conn.writer
        w.write(_head("200 OK", SSE))
        w.write(_chunked(chunk({"role": "assistant", "content": "begin "})))
        w.write(_chunked(b"data: "))
        piece = _chunked(b"x" * 65536)
        for _ in range(512 * 16):
            w.write(piece)
            await w.drain()
        w.write(_chunked(b""))
        return True

    async def _mode_invalid_utf8(self, conn: _Conn) -> bool:
        w = conn.writer
        if self._streamed(conn):
            w.write(_head("200 OK", SSE))
            w.write(_chunked(chunk({"role": "assistant", "content": "fine "})))
            w.write(
                _chunked(
                    b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe"},'
                    b'"finish_reason":null}]}\n\n'
                )
            )
            w.write(_chunked(chunk({}, "stop")))
            w.write(_chunked(b"data: [DONE]\n\n"))
            w.write(_chunked(b""))
        else:
            body = completion("\x00").replace(b"\\u0000", b"\xff\xfe")
            w.write(_head("200 OK", {**JSON, "content-length": str(len(body))}))
            w.write(body)
        return True

    async def _mode_spec_sse(self, conn: _Conn) -> bool:
        """A stream only the SSE rules read right (the openai SDK's own decoder reads it):
        a chunk's JSON over several ``data:`` lines (joined with LF), ``id:`` / ``retry:``
        fields, comments and CR LF line ends."""
        text = "echo: " + _user_text(conn.request.body)
        if not self._streamed(conn):
            return await self._answer(conn)
        w = conn.writer
        w.write(_head("200 OK", SSE))
        w.write(_chunked(b": hello\r\nretry: 1000\r\n\r\n"))
        w.write(_chunked(chunk({"role": "assistant", "content": ""})))
        payload = chunk({"content": text})[len(b"data: ") : -2]
        half = payload.index(b'"choices"')
        w.write(_chunked(b"id: 1\r\ndata: " + payload[:half] + b"\r\ndata:" + payload[half:]))
        w.write(_chunked(b"\r\n\r\n"))
        w.write(_chunked(chunk({}, "stop")))
        w.write(_chunked(b"data: [DONE]\n\n"))
        w.write(_chunked(b""))
        return True

    async def _mode_reset_body(self, conn: _Conn) -> bool:
        body = completion("echo: cut short")
        conn.writer.write(_head("200 OK", {**JSON, "content-length": str(len(body))}))
        conn.writer.write(body[:20])
        await conn.writer.drain()
        await asyncio.sleep(0.05)
        return self._reset(conn)

    async def _mode_reset_stream(self, conn: _Conn) -> bool:
        w = conn.writer
        w.write(_head("200 OK", SSE))
        w.write(_chunked(chunk({"role": "assistant", "content": "begin "})))
        w.write(_chunked(chunk({"content": "more "})))
        await w.drain()
        await asyncio.sleep(0.05)
        return self._reset(conn)

    async def _mode_duplicate_keys(self, conn: _Conn) -> bool:
        """A tool call whose arguments name one key twice (parsers disagree on which wins)."""
        args = '{"city":"Paris","city":42}'
        w = conn.writer
        if self._streamed(conn):
            w.write(_head("200 OK", SSE))
            w.write(
                _chunked(
                    chunk(
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "f", "arguments": args},
                                }
                            ],
                        }
                    )
                )
            )
            w.write(_chunked(chunk({}, "tool_calls")))
            w.write(_chunked(b"data: [DONE]\n\n"))
            w.write(_chunked(b""))
        else:
            body = completion("", arguments=args)
            w.write(_head("200 OK", {**JSON, "content-length": str(len(body))}))
            w.write(body)
        return True


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (a deadline, not a window)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
