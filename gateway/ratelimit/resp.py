"""A minimal pipelined Redis client for the rate limiter's two scripts.

Every request runs one check script and one token-settle script. Through redis-py's asyncio
client each call pays for a connection-pool checkout, a retry wrapper, observability hooks
and a generic parser; this client sends ``EVALSHA`` over one connection, pipelined
(replies come back in order, so each caller awaits its own future), for a fraction of
that (figures in ``docs/performance.md``). Only what the limiter needs: RESP2 replies, ``AUTH``
and ``SELECT`` from a ``redis://`` URL, ``EVALSHA`` with ``EVAL`` on ``NOSCRIPT``.

Errors are redis-py's exception types (``redis.exceptions.ConnectionError``,
``TimeoutError``, ``ResponseError``) or ``OSError``, so callers' failure handling is the
same as with redis-py. A timed-out or broken connection is dropped with every reply still
pending on it (a late reply must never be matched to the next caller); the next call
reconnects.

Example::

    client = RespClient.from_url("redis://127.0.0.1:6379/0", timeout_s=1.0)
    reply = await client.evalsha(sha, script, keys=["k"], args=[1, 2])
    await client.aclose()
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["RespClient", "script_sha", "supports"]

_INCOMPLETE = object()


def supports(url: str) -> bool:
    """Whether ``url`` is one this client speaks (plain TCP ``redis://``)."""
    return urlsplit(url).scheme == "redis"


def script_sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()


def pack(args: Sequence[Any]) -> bytes:
    """One command in RESP (an array of bulk strings)."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


_evalsha_heads: dict[tuple[str, int], bytes] = {}


def pack_evalsha(sha: str, keys: Sequence[Any], args: Sequence[Any]) -> bytes:
    """``pack(("EVALSHA", sha, len(keys), *keys, *args))``, the constant head cached."""
    head = _evalsha_heads.get((sha, len(keys)))
    if head is None:
        head = _evalsha_heads.setdefault(
            (sha, len(keys)), pack(("EVALSHA", sha, len(keys)))[4:]
        )
    n = 3 + len(keys) + len(args)
    parts = [b"*%d\r\n" % n, head]
    for arg in (*keys, *args):
        kind = type(arg)
        if kind is int:  # the scripts' numbers: no str() round trip
            data = b"%d" % arg
        elif kind is bytes:
            data = arg
        else:
            data = str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def parse(buf: bytes | bytearray, pos: int) -> tuple[Any, int]:
    """One RESP2 reply at ``pos``: (value, next position), or (_INCOMPLETE, pos).
    An error reply is returned as a ``ResponseError`` instance."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        return _INCOMPLETE, pos
    kind = buf[pos : pos + 1]
    line = bytes(buf[pos + 1 : end])
    nxt = end + 2
    if kind == b":":
        return int(line), nxt
    if kind == b"+":
        return line.decode(), nxt
    if kind == b"-":
        return ResponseError(line.decode(errors="replace")), nxt
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, nxt
        if len(buf) < nxt + n + 2:
            return _INCOMPLETE, pos
        return bytes(buf[nxt : nxt + n]), nxt + n + 2
    if kind == b"*":
        n = int(line)
        if n < 0:
            return None, nxt
        items = []
        for _ in range(n):
            item, nxt = parse(buf, nxt)
            if item is _INCOMPLETE:
                return _INCOMPLETE, pos
            items.append(item)
        return items, nxt
    raise RedisConnectionError(f"unexpected RESP reply type {kind!r}")


class _Protocol(asyncio.Protocol):
    """One connection: replies are matched, in order, to the callers' futures."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.buf = bytearray()
        self.waiters: deque[asyncio.Future[Any]] = deque()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def send(self, data: bytes) -> asyncio.Future[Any]:
        if self.closed:
            raise RedisConnectionError("connection closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self.transport.write(data)
        return fut

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        try:
            while self.waiters:
                value, nxt = parse(buf, pos)
                if value is _INCOMPLETE:
                    break
                pos = nxt
                fut = self.waiters.popleft()
                if fut.done():
                    continue  # the caller was cancelled; the reply is still consumed
                if isinstance(value, ResponseError):
                    fut.set_exception(value)
                else:
                    fut.set_result(value)
        except (ValueError, RedisConnectionError) as exc:
            self.abort(RedisConnectionError(f"bad reply from Redis: {exc}"))
            return
        del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(RedisConnectionError(f"connection to Redis lost: {exc!r}"))

    def fail(self, exc: Exception) -> None:
        self.closed = True
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_exception(exc)

    def abort(self, exc: Exception) -> None:
        self.fail(exc)
        if self.transport is not None:
            self.transport.abort()


@dataclass(frozen=True, slots=True)
class _Target:
    host: str
    port: int
    db: int
    username: str | None
    password: str | None


def _target(url: str) -> _Target:
    parts = urlsplit(url)
    if parts.scheme != "redis":
        raise ValueError(f"RespClient speaks redis:// only, not {parts.scheme}://")
    path = parts.path.lstrip("/")
    return _Target(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 6379,
        db=int(path) if path else 0,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )


class RespClient:
    """Pipelined ``EVALSHA`` over one connection (see module docstring)."""

    def __init__(self, target: _Target, *, timeout_s: float) -> None:
        self._target = target
        self.timeout_s = timeout_s
        self._conn: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None

    @classmethod
    def from_url(cls, url: str, *, timeout_s: float = 1.0) -> RespClient:
        return cls(_target(url), timeout_s=timeout_s)

    async def _open(self) -> _Protocol:
        t = self._target
        loop = asyncio.get_running_loop()
        proto: _Protocol | None = None
        try:
            async with asyncio.timeout(self.timeout_s):
                _, proto = await loop.create_connection(_Protocol, t.host, t.port)
                setup: list[asyncio.Future[Any]] = []
                if t.password is not None:
                    auth = ("AUTH", t.username, t.password) if t.username else ("AUTH", t.password)
                    setup.append(proto.send(pack(auth)))
                if t.db:
                    setup.append(proto.send(pack(("SELECT", t.db))))
                for fut in setup:
                    await fut
        except BaseException as exc:
            if proto is not None:
                proto.abort(RedisConnectionError("connection setup failed"))
            if isinstance(exc, TimeoutError):
                raise RedisTimeoutError("timed out connecting to Redis") from exc
            raise
        return proto

    async def _connection(self) -> _Protocol:
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._connecting is None:  # one connect for every concurrent caller
            self._connecting = asyncio.ensure_future(self._open())
        connecting = self._connecting
        try:
            conn = await asyncio.shield(connecting)
        finally:
            if self._connecting is connecting and connecting.done():
                self._connecting = None
        self._conn = conn
        return conn

    async def execute(self, *args: Any) -> Any:
        """Send one command and return its reply (``ResponseError`` raised)."""
        return await self._send(pack(args))

    async def _send(self, packed: bytes) -> Any:
        conn = await self._connection()
        fut = conn.send(packed)
        # A timer on the reply, not ``asyncio.timeout`` (a third of its CPU).
        timer = asyncio.get_running_loop().call_later(self.timeout_s, self._timed_out, conn)
        try:
            return await fut
        finally:
            timer.cancel()

    def _timed_out(self, conn: _Protocol) -> None:
        # Later replies on this connection would be matched to the wrong callers: every
        # caller still waiting on it fails now, this one included.
        conn.abort(RedisTimeoutError(f"Redis did not answer within {self.timeout_s:g}s"))

    async def evalsha(
        self, sha: str, script: str, *, keys: Sequence[Any], args: Sequence[Any]
    ) -> Any:
        """Run a Lua script by hash, loading it with ``EVAL`` if the server lacks it."""
        try:
            return await self._send(pack_evalsha(sha, keys, args))
        except ResponseError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return await self.execute("EVAL", script, len(keys), *keys, *args)

    async def aclose(self) -> None:
        connecting, self._connecting = self._connecting, None
        if connecting is not None and not connecting.done():
            connecting.cancel()
        conn, self._conn = self._conn, None
        if conn is not None and conn.transport is not None:
            conn.fail(RedisConnectionError("client closed"))
            conn.transport.close()
