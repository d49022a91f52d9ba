"""A TCP forwarder whose link can be cut and restored: a real network outage between the
gateway and a real PostgreSQL or Redis, without stopping the shared server.

    with NetCut(5432) as link:          # 127.0.0.1:link.port -> 127.0.0.1:5432
        ... use f"postgresql://postgres@127.0.0.1:{link.port}/db" ...
        link.cut()                       # drop every connection, refuse new ones
        link.restore()                   # accept again on the same port
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from concurrent.futures import Future


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class NetCut:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = _free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def _call(self, coro: object) -> None:
        fut: Future[None] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        fut.result(timeout=10)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._writers):
            transport = w.transport
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            transport.abort()
        self._writers.clear()

    def start(self) -> NetCut:
        self._thread.start()
        self._call(self._listen())
        return self

    def cut(self) -> None:
        """Reset every open connection and refuse new ones."""
        self._call(self._cut())

    def restore(self) -> None:
        """Accept connections again (same port)."""
        self._call(self._listen())

    def close(self) -> None:
        self._call(self._cut())
        self._call(self._cancel_pipes())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _cancel_pipes(self) -> None:
        pipes = asyncio.all_tasks() - {asyncio.current_task()}
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)

    def __enter__(self) -> NetCut:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
