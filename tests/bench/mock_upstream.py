"""A fast OpenAI-compatible mock upstream for the gateway benchmark.

Raw asyncio (uvloop when installed) HTTP/1.1 with keep-alive; no framework, so the mock
itself costs little CPU per request and the figures measure the gateway, not the mock.
Answers every ``POST .../chat/completions`` with a fixed ``chat.completion`` carrying one
``create_refund`` tool call; the reply depends on the request body:

- ``"stream":true`` -> SSE: role chunk, tool-call start, the arguments in fragments, finish,
  usage, ``[DONE]``; the upstream model name ``...-text<N>`` streams N text deltas instead
  (used to measure the gateway's CPU per extra SSE event);
- upstream model ``...-agent`` -> one call to the strict ``edit_file`` of the agent-sized
  request (``agent_request.py``), with ``AGENT_ARGS``, and an agent-sized prompt's usage;
- upstream model ``...-fix`` -> an invalid call first (``amount_pence`` as a string), the
  valid one when the request is a correction (it carries a ``tool_call_id``);
- ``GET`` (any path) -> ``{"connections": C, "requests": R}``: the connections that carried
  at least one completion request and the completion requests answered since start (over
  TLS, C is the number of TLS handshakes clients paid for).

Run standalone::

    python tests/bench/mock_upstream.py --port 0   # prints the port on stdout
    python tests/bench/mock_upstream.py --port 0 --tls-cert server.pem   # HTTPS

``--tls-cert`` is one PEM file with the private key and the certificate chain (the
benchmark makes it, and the CA its clients trust, with ``trustme``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import ssl
import sys
from collections.abc import Callable
from typing import Any

GOOD_ARGS = '{"order_number":"582131","amount_pence":1250,"reason":"damaged","note":null}'
BAD_ARGS = '{"order_number":"582131","amount_pence":"12.50","reason":"damaged","note":null}'

AGENT_TOOL = "edit_file"
AGENT_ARGS = (
    '{"path":"gateway/part_5/limits.py","old_string":"    return len(value) < limit\\n"'
    ',"new_string":"    # the limit is inclusive, as documented\\n'
    '    return len(value) <= limit\\n","replace_all":false}'
)


def _completion(
    args: str, name: str = "create_refund", usage: tuple[int, int] = (120, 30)
) -> bytes:
    escaped = args.replace("\\", "\\\\").replace('"', '\\"')
    return (
        '{"id":"chatcmpl-mock","object":"chat.completion","created":1764460800,'
        '"model":"mock","choices":[{"index":0,"message":{"role":"assistant","content":null,'
        f'"tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"{name}",'
        f'"arguments":"{escaped}"}}}}]}},"finish_reason":"tool_calls"}}],'
        f'"usage":{{"prompt_tokens":{usage[0]},"completion_tokens":{usage[1]},'
        f'"total_tokens":{sum(usage)}}}}}'
    ).encode()


def _chunk(delta: str, finish: str = "null") -> str:
    return (
        'data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1764460800,'
        f'"model":"mock","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}\n\n'
    )


def _sse_tool(fragments: int = 6) -> bytes:
    parts = [_chunk('{"role":"assistant","content":null}')]
    step = max(1, len(GOOD_ARGS) // fragments)
    pieces = [GOOD_ARGS[i : i + step] for i in range(0, len(GOOD_ARGS), step)]
    for i, piece in enumerate(pieces):
        head = '"id":"call_1","type":"function",' if i == 0 else ""
        name = '"name":"create_refund",' if i == 0 else ""
        esc = piece.replace('"', '\\"')
        parts.append(
            _chunk(
                f'{{"tool_calls":[{{"index":0,{head}"function":{{{name}"arguments":"{esc}"}}}}]}}'
            )
        )
    parts.append(_chunk("{}", '"tool_calls"'))
    parts.append(_usage_chunk())
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def _usage_chunk() -> str:
    return (
        'data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1764460800,'
        '"model":"mock","choices":[],'
        '"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}\n\n'
    )


def _sse_text(n: int) -> bytes:
    parts = [_chunk('{"role":"assistant","content":""}')]
    parts.extend(_chunk(f'{{"content":"word{i} "}}') for i in range(n))
    parts.append(_chunk("{}", '"stop"'))
    parts.append(_usage_chunk())
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def _response(body: bytes, content_type: bytes) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: "
        + content_type
        + b"\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\nconnection: keep-alive\r\n\r\n"
        + body
    )


_JSON = b"application/json"
_SSE = b"text/event-stream"
_GOOD = _response(_completion(GOOD_ARGS), _JSON)
_BAD = _response(_completion(BAD_ARGS), _JSON)
_AGENT = _response(_completion(AGENT_ARGS, AGENT_TOOL, (21400, 96)), _JSON)
_SSE_TOOL = _response(_sse_tool(), _SSE)
_TEXT_N = re.compile(rb'"model"\s*:\s*"[^"]*-text(\d+)"')
_sse_text_cache: dict[int, bytes] = {}


def reply_for(body: bytes) -> bytes:
    """The full HTTP response for one request body (see module docstring)."""
    if b'"stream":true' in body or b'"stream": true' in body:
        m = _TEXT_N.search(body)
        if m is None:
            return _SSE_TOOL
        n = int(m.group(1))
        cached = _sse_text_cache.get(n)
        if cached is None:
            cached = _sse_text_cache[n] = _response(_sse_text(n), _SSE)
        return cached
    if b'-agent"' in body:
        return _AGENT
    if b'-fix"' in body and b'"tool_call_id"' not in body:
        return _BAD
    return _GOOD


class _Counts:
    """What the ``GET`` answer reports (one event loop: plain integers suffice)."""

    connections = 0
    requests = 0


def _stats() -> bytes:
    body = f'{{"connections":{_Counts.connections},"requests":{_Counts.requests}}}'.encode()
    return _response(body, _JSON)


class _Http(asyncio.Protocol):
    __slots__ = ("buf", "served", "transport")

    def __init__(self) -> None:
        self.buf = b""
        self.served = False
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's transports are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        out: list[bytes] = []
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buf[:end].lower()
            i = head.find(b"content-length:")
            length = 0
            if i >= 0:
                j = head.find(b"\r\n", i)
                length = int(head[i + 15 : j if j >= 0 else len(head)])
            total = end + 4 + length
            if len(buf) < total:
                break
            if buf.startswith(b"GET "):
                out.append(_stats())
            else:
                out.append(reply_for(buf[end + 4 : total]))
                _Counts.requests += 1
                if not self.served:
                    self.served = True
                    _Counts.connections += 1
            buf = buf[total:]
        self.buf = buf
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve(
    port: int,
    ready: Callable[[int], None],
    cpu: int | None = None,
    tls_cert: str | None = None,
) -> None:
    """Serve on 127.0.0.1:``port`` (0: any free port) forever; ``ready(port)`` once bound.
    ``tls_cert``: a PEM with the key and certificate chain, to serve HTTPS."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    _install_uvloop()
    context = None
    if tls_cert is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls_cert)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Http, "127.0.0.1", port, backlog=1024, ssl=context)
        ready(server.sockets[0].getsockname()[1])
        parent = os.getppid()
        async with server:
            while os.getppid() == parent:  # noqa: ASYNC110 - never outlive our parent
                await asyncio.sleep(1.0)

    asyncio.run(main())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--tls-cert", default=None, help="PEM: private key + certificate chain")
    ns = parser.parse_args()

    def _announce(p: int) -> None:
        print(p, flush=True)

    try:
        serve(ns.port, _announce, ns.cpu, ns.tls_cert)
    except KeyboardInterrupt:
        sys.exit(0)
