"""A small HTTP forward proxy for tests: CONNECT tunnels (HTTPS) and absolute-form requests
(plain HTTP), as corporate egress proxies serve them. It records what it was asked
(``seen``: method and target) and relays bytes both ways; nothing else.

    with ForwardProxy() as proxy:
        env = {"HTTPS_PROXY": proxy.url}
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

from tests.support.threaded_server import ThreadedServer


class ForwardProxy:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._server = ThreadedServer(self._serve, "forward-proxy")

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ForwardProxy:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> ForwardProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        self.seen.append((method, target))
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            first = b""
            answer = b"HTTP/1.1 200 Connection established\r\n\r\n"
        else:
            parts = urlsplit(target)
            host, port = parts.hostname or "", str(parts.port or 80)
            origin = parts.path + (f"?{parts.query}" if parts.query else "")
            first = f"{method} {origin} {version}".encode() + head[head.index(b"\r\n") :]
            answer = b""
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            writer.close()
            return
        writer.write(answer)
        up_writer.write(first)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except ConnectionError:
        pass
    finally:
        with contextlib.suppress(Exception):
            dst.close()
