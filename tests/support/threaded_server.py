"""An ``asyncio.start_server`` server on an event loop of its own thread, for test peers
written on raw streams (``HostileUpstream``, ``ForwardProxy``)."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class ThreadedServer:
    """Serves ``handler`` on 127.0.0.1 (a free port) until ``stop``; ``stop`` aborts the
    connections still open (``writers``) so no test waits on a peer that never closes."""

    def __init__(
        self,
        handler: Handler,
        name: str,
        *,
        tls: ssl.SSLContext | None = None,
        limit: int = 1 << 16,
    ) -> None:
        self.handler = handler
        self.name = name
        self.tls = tls
        self.limit = limit
        self.port = 0
        self.writers: set[asyncio.StreamWriter] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            await self.handler(reader, writer)
        finally:
            self.writers.discard(writer)

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls, limit=self.limit)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name} did not start")

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self.writers):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
