"""Helpers for the reliability and security suites.

- ``chat_body(...)``: a strict create_refund request (``tests.support.openai_helpers``).
- ``ledger_rows(gw, ids)``: the gateway's SQLite ledger rows, waiting until every
  ``request_id`` in ``ids`` is there (the ledger writes in the background).
- ``raw_http(port, data, ...)``: bytes on a raw socket, for what clients libraries refuse to
  send (lying content-length, slow headers, oversized headers).
"""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import MESSAGES, refund_tool


def chat_body(model: str = "m", *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": MESSAGES,
        "tools": [refund_tool()],
        "stream": stream,
    }
    body.update(extra)
    return body


def db_path(gw: GatewayProcess) -> Path:
    return Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))


def all_rows(gw: GatewayProcess) -> list[dict[str, Any]]:
    con = sqlite3.connect(db_path(gw), timeout=10)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM usage_records")]
    finally:
        con.close()


def ledger_rows(
    gw: GatewayProcess, ids: Iterable[str], timeout: float = 10.0
) -> dict[str, dict[str, Any]]:
    """Rows for ``ids`` (by request id); fails if any is still missing after ``timeout``."""
    wanted = set(ids)
    deadline = time.monotonic() + timeout
    while True:
        rows = all_rows(gw)
        found = {r["request_id"]: r for r in rows if r["request_id"] in wanted}
        if len(found) == len(wanted) or time.monotonic() > deadline:
            missing = wanted - set(found)
            assert not missing, f"ledger rows missing for {sorted(missing)[:5]}"
            return found
        time.sleep(0.05)


def raw_http(
    port: int,
    chunks: Iterable[bytes],
    *,
    pause: float = 0.0,
    read_timeout: float = 10.0,
) -> tuple[bytes, float]:
    """Send ``chunks`` (``pause`` seconds apart, stopping if the server closes), then read
    until the server closes the connection. Returns (everything read, seconds taken)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as sock:
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            if pause:
                time.sleep(pause)
        data = b""
        try:
            while True:
                part = sock.recv(65536)
                if not part:
                    break
                data += part
        except (ConnectionResetError, TimeoutError):
            pass
    return data, time.monotonic() - started


def parse_response(raw: bytes) -> tuple[int, dict[str, str], Any]:
    """Status, headers and JSON body of one HTTP/1.1 response with a content-length."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(body)))
    return status, headers, orjson.loads(body[:length]) if length else None
