"""A request carrying ``Upgrade`` against a real ``syntic serve``, over raw sockets.

The gateway serves no WebSocket or h2c, so ``Connection: Upgrade`` must change nothing:
the body is read by its Content-Length or chunked framing, the request is answered, and
the next request on the connection is parsed where that body ends. Otherwise a body
(sent in a later packet, as a proxy forwarding the request may well do) would be parsed
as a request of its own: one smuggled past whatever checked the outer request.
The responses are read with h11, a parser independent of the server's.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import h11
import orjson
import pytest

from tests.support.gateway_proc import GatewayProcess

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
CHECK_BODY = orjson.dumps(
    {
        "tools": [
            {
                "type": "function",
                "function": {"name": "count", "strict": True, "parameters": SCHEMA},
            }
        ]
    }
)
# A body that is itself a request: answered on its own only if the body is misparsed.
SMUGGLED = b"GET /healthz?smuggled=1 HTTP/1.1\r\nhost: t\r\n\r\n"
UPGRADES = [
    "connection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\n"
    "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
    "connection: keep-alive, Upgrade\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAAP__\r\n",
]
NEXT = b"GET /healthz HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n"


class Answers:
    """The client side of one connection: raw bytes out, responses parsed by h11."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.h11 = h11.Connection(h11.CLIENT)
        self.awaiting = False  # h11 has been told of the request being answered

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def informational(self) -> int:
        """The status of the next interim (1xx) response, to a POST."""
        event = self._next("POST")
        assert isinstance(event, h11.InformationalResponse), event
        return event.status_code

    def response(self, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        """The next complete response, to a ``method`` request: status, headers, body."""
        event = self._next(method)
        while isinstance(event, h11.InformationalResponse):
            event = self._next(method)
        assert isinstance(event, h11.Response), event
        status, headers = event.status_code, {k.decode(): v.decode() for k, v in event.headers}
        body = b""
        while not isinstance(event := self._next(method), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            body += event.data
        self.awaiting = False
        if self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        return status, headers, body

    def rest(self) -> bytes:
        """Everything the server sends until it closes the connection."""
        out = self.h11.trailing_data[0]
        while part := self.sock.recv(65536):
            out += part
        return out

    def close(self) -> None:
        self.sock.close()

    def _next(self, method: str) -> Any:
        if not self.awaiting:  # h11 parses a response only to a request it has seen
            self.h11.send(h11.Request(method=method, target="/", headers=[("host", "t")]))
            self.h11.send(h11.EndOfMessage())
            self.awaiting = True
        while (event := self.h11.next_event()) is h11.NEED_DATA:
            self.h11.receive_data(self.sock.recv(65536))
        return event


def head(method: str, path: str, extra: str, key: str | None = None) -> bytes:
    auth = f"authorization: Bearer {key}\r\n" if key else ""
    return f"{method} {path} HTTP/1.1\r\nhost: t\r\n{auth}{extra}\r\n".encode()


@pytest.fixture
def conn(gateway: GatewayProcess) -> Iterator[Answers]:
    answers = Answers(gateway)
    yield answers
    answers.close()


@pytest.mark.parametrize("upgrade", UPGRADES, ids=["websocket", "h2c"])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_an_existing_route_reads_the_body_sent_after_the_head(
    gateway: GatewayProcess, conn: Answers, upgrade: str, framing: str
) -> None:
    if framing == "content-length":
        extra, pieces = f"content-length: {len(CHECK_BODY)}\r\n", [CHECK_BODY[:10], CHECK_BODY[10:]]
    else:
        extra = "transfer-encoding: chunked\r\n"
        pieces = [b"%x\r\n%s\r\n" % (len(p), p) for p in (CHECK_BODY[:10], CHECK_BODY[10:])]
        pieces.append(b"0\r\n\r\n")
    # expect-100: the body is sent only once the server has parsed the head and the
    # endpoint asks for the body, so it surely comes in later packets.
    conn.send(
        head(
            "POST",
            "/v1/schemas/check",
            upgrade + extra + "expect: 100-continue\r\n",
            gateway.api_key,
        )
    )
    assert conn.informational() == 100
    for piece in pieces:
        conn.send(piece)
    conn.send(NEXT)

    status, headers, body = conn.response("POST")
    assert status == 200, body  # the endpoint got the whole body (an empty one is a 400)
    assert orjson.loads(body)["schemas"][0]["name"] == "count"
    assert "upgrade" not in headers and headers.get("connection") != "upgrade"
    status, _, body = conn.response()
    assert status == 200 and orjson.loads(body)["status"] == "ok"  # the next request
    assert conn.rest() == b""  # and nothing else: the connection closed as asked


@pytest.mark.parametrize("upgrade", UPGRADES, ids=["websocket", "h2c"])
@pytest.mark.parametrize("path", ["/v1/no-such-route", "/no-such-route"])
def test_an_unknown_route_does_not_run_its_body_as_a_request(
    gateway: GatewayProcess, conn: Answers, upgrade: str, path: str
) -> None:
    conn.send(head("POST", path, upgrade + f"content-length: {len(SMUGGLED)}\r\n", gateway.api_key))
    status, _, body = conn.response("POST")  # answered before the body is read
    assert status == 404 and orjson.loads(body)["error"]["type"] == "invalid_request_error"
    conn.send(SMUGGLED)  # the body, in a later packet, then the next request
    conn.send(NEXT)
    status, _, body = conn.response()
    assert status == 200 and orjson.loads(body)["status"] == "ok"
    assert conn.rest() == b""  # one answer for NEXT; none for the body


@pytest.mark.parametrize("upgrade", UPGRADES, ids=["websocket", "h2c"])
def test_a_get_with_upgrade_is_answered_and_the_next_request_too(
    conn: Answers, upgrade: str
) -> None:
    # One packet: what follows the headers is the next request, not a new protocol.
    conn.send(head("GET", "/healthz", upgrade) + NEXT)
    for _ in range(2):
        status, _, body = conn.response()
        assert status == 200 and orjson.loads(body)["status"] == "ok"
    assert conn.rest() == b""


def test_many_upgrade_requests_in_one_packet_are_each_answered(conn: Answers) -> None:
    count = 300
    conn.send(head("GET", "/healthz", UPGRADES[0]) * count + NEXT)
    for _ in range(count + 1):
        assert conn.response()[0] == 200
    assert conn.rest() == b""
