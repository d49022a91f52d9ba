"""The limiter's pipelined Redis client: RESP parsing, and against the real Redis."""

from __future__ import annotations

import asyncio
import secrets
import socket
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.ratelimit.resp import (
    RespClient,
    pack,
    pack_evalsha,
    parse,
    script_sha,
    supports,
)

REDIS = "redis://127.0.0.1:6379"


@pytest.mark.parametrize(
    ("wire", "value"),
    [
        (b":42\r\n", 42),
        (b":-3\r\n", -3),
        (b"+OK\r\n", "OK"),
        (b"$5\r\nhello\r\n", b"hello"),
        (b"$0\r\n\r\n", b""),
        (b"$-1\r\n", None),
        (b"*-1\r\n", None),
        (b"*4\r\n:1\r\n:2\r\n:30\r\n:59000\r\n", [1, 2, 30, 59000]),
        (b"*2\r\n*1\r\n$1\r\na\r\n:7\r\n", [[b"a"], 7]),
    ],
)
def test_parse_complete_replies(wire: bytes, value: Any) -> None:
    assert parse(wire + b":9\r\n", 0) == (value, len(wire))
    # Every strict prefix is incomplete, never a wrong value.
    for cut in range(len(wire)):
        got, pos = parse(wire[:cut], 0)
        assert pos == 0 and got is not None and not isinstance(got, int | str | bytes | list)


def test_parse_error_reply_and_pack() -> None:
    err, pos = parse(b"-NOSCRIPT No matching script\r\n", 0)
    assert isinstance(err, ResponseError) and str(err).startswith("NOSCRIPT") and pos == 30
    assert pack(("GET", "k", 12)) == b"*3\r\n$3\r\nGET\r\n$1\r\nk\r\n$2\r\n12\r\n"
    assert supports("redis://h:1/0") and not supports("rediss://h:1/0")
    for keys, args in ((["k"], [1, -1, 30, 60]), ([], []), (["a", b"b"], ["x" * 20])):
        assert pack_evalsha("f" * 40, keys, args) == pack(
            ("EVALSHA", "f" * 40, len(keys), *keys, *args))


async def test_evalsha_loads_unknown_script_then_pipelines_in_order() -> None:
    key = f"resp_test:{secrets.token_hex(6)}"
    script = f"-- {secrets.token_hex(8)}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])"
    client = RespClient.from_url(REDIS + "/0")
    try:
        first = await client.evalsha(script_sha(script), script, keys=[key], args=[1])
        assert first == 1  # NOSCRIPT -> EVAL loaded it
        results = await asyncio.gather(
            *(client.evalsha(script_sha(script), script, keys=[key], args=[1])
              for _ in range(200))
        )
        assert sorted(results) == list(range(2, 202))
        assert results == sorted(results)  # replies matched to callers in send order
        with pytest.raises(ResponseError):
            await client.execute("NOSUCHCOMMAND")
        assert await client.execute("GET", key) == b"201"  # still usable after an error
    finally:
        await client.execute("DEL", key)
        await client.aclose()


async def test_selects_the_database_from_the_url() -> None:
    key = f"resp_test:{secrets.token_hex(6)}"
    client = RespClient.from_url(REDIS + "/3")
    other = aioredis.Redis.from_url(REDIS + "/3")
    try:
        assert await client.execute("SET", key, "x") == "OK"
        assert await other.get(key) == b"x"
    finally:
        await other.delete(key)
        await other.aclose()
        await client.aclose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_refused_connection_raises_an_os_error() -> None:
    client = RespClient.from_url(f"redis://127.0.0.1:{_free_port()}/0", timeout_s=0.5)
    with pytest.raises(OSError):
        await client.execute("PING")
    await client.aclose()


async def test_silent_server_times_out_and_the_next_call_reconnects() -> None:
    answered: list[bool] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # First connection: swallow the command. Later ones: answer PING.
        if not answered:
            answered.append(False)
            await reader.read(100)
            await reader.read(100)  # until the client drops it
        else:
            await reader.read(100)
            writer.write(b"+PONG\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = RespClient.from_url(f"redis://127.0.0.1:{port}/0", timeout_s=0.2)
    try:
        with pytest.raises(RedisTimeoutError):
            await client.execute("PING")
        assert await client.execute("PING") == "PONG"
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


async def test_connection_lost_fails_pending_callers() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.transport.abort()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = RespClient.from_url(f"redis://127.0.0.1:{port}/0", timeout_s=2.0)
    try:
        with pytest.raises(RedisConnectionError):
            await asyncio.gather(client.execute("PING"), client.execute("PING"))
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
