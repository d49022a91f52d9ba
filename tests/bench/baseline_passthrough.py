"""The reference peer for the gateway's CPU target: the least a strict pass-through with a
durable per-request record does.

A minimal Starlette app under uvicorn (one process, its default uvloop + httptools when
installed, no access log) with one route, ``POST /v1/chat/completions``: it compiles each
strict tool's parameters through the validator's shared cache (``validator.compile``: a
cache hit after the first request), forwards the body unchanged to
``<upstream>/chat/completions`` over one shared ``aiohttp.ClientSession``, validates every
strict tool call's arguments in the answer (``CompiledSchema.validate_json``) and returns
the upstream's JSON.

The durable record, as the gateway keeps one (``docs/decisions/0017``): before the answer,
one JSON line per request appended to a spool file (one ``os.write`` on an ``O_APPEND``
descriptor: the append and the flush in one system call, into the page cache, so a killed
process loses no answered request), and the same row queued for a writer thread that
inserts the queued rows into SQLite (WAL, ``synchronous = NORMAL``) in one
``executemany`` every 0.2 s, then ``fsync``s the spool. ``--light`` drops the record (the
pass-through the targets used before they asked for one), for comparison.

No auth, limits, logging, metrics, corrections or translation: the gateway's CPU per
request is judged against this one's, measured side by side (``gateway_bench.py
--compare-peers``). Run::

    python tests/bench/baseline_passthrough.py --port 8100 --upstream http://127.0.0.1:8200/v1
        [--record-dir DIR | --light]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import validator

_JSON = "application/json"
FLUSH_INTERVAL_S = 0.2  # the gateway's default ledger_flush_interval_s
FIELDS = (
    "request_id",
    "model",
    "status",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "started_at",
    "finished_at",
)
_CREATE = (
    "CREATE TABLE IF NOT EXISTS records (request_id TEXT PRIMARY KEY, model TEXT,"
    " status INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL,"
    " completion_tokens INTEGER NOT NULL, latency_ms REAL NOT NULL,"
    " started_at REAL NOT NULL, finished_at REAL NOT NULL)"
)
_INSERT = (
    f"INSERT INTO records ({', '.join(FIELDS)}) VALUES ({', '.join('?' for _ in FIELDS)})"
    " ON CONFLICT (request_id) DO NOTHING"
)

Row = tuple[str, str | None, int, int, int, float, float, float]


class DurableRecord:
    """The spool file and the SQLite writer thread (see module docstring). ``add`` is
    called from the event loop; the thread owns the database connection."""

    def __init__(self, directory: Path, interval_s: float = FLUSH_INTERVAL_S) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.interval_s = interval_s
        self.fd = os.open(
            directory / f"spool-{os.getpid()}.jsonl",
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
            0o600,
        )
        self.queue: collections.deque[Row] = collections.deque()  # append/popleft: GIL-safe
        self.inserted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="record-writer", daemon=True)
        self._thread.start()

    def add(self, row: Row) -> None:
        """Spool the row (written when this returns), then queue it for the database."""
        line = orjson.dumps(dict(zip(FIELDS, row, strict=True)), option=orjson.OPT_APPEND_NEWLINE)
        view = memoryview(line)
        while view:  # a short write (a signal, a full disk): write the rest
            view = view[os.write(self.fd, view) :]
        self.queue.append(row)

    def _run(self) -> None:
        db = sqlite3.connect(self.directory / "records.db", isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(_CREATE)
            while not self._stop.wait(self.interval_s):
                self._flush(db)
            self._flush(db)
        finally:
            db.close()

    def _flush(self, db: sqlite3.Connection) -> None:
        batch = [self.queue.popleft() for _ in range(len(self.queue))]
        if not batch:
            return
        with db:  # one transaction per batch
            db.executemany(_INSERT, batch)
        self.inserted += len(batch)
        os.fsync(self.fd)  # batched, as the gateway's spool: a process crash, not a power cut

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self.fd)


def _request_id() -> str:
    # Time-ordered with a random tail, as the gateway's (cheap SQLite inserts: 0002).
    return f"{time.time_ns():x}{os.urandom(6).hex()}"


def _error(message: str) -> bytes:
    return orjson.dumps({"error": {"message": message}})


def strict_schemas(payload: Any) -> dict[str, validator.CompiledSchema]:
    """Each strict function tool's compiled parameters, by tool name."""
    found: dict[str, validator.CompiledSchema] = {}
    tools = payload.get("tools") if isinstance(payload, dict) else None
    for tool in tools if isinstance(tools, list) else ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("strict") is True and isinstance(fn.get("name"), str):
            found[fn["name"]] = validator.compile(fn.get("parameters", {}))
    return found


def invalid_calls(answer: Any, schemas: dict[str, validator.CompiledSchema]) -> list[str]:
    """A message per strict tool call whose arguments do not match its schema."""
    problems: list[str] = []
    choices = answer.get("choices") if isinstance(answer, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            fn = call.get("function") if isinstance(call, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            compiled = schemas.get(name) if isinstance(name, str) else None
            if fn is None or compiled is None:
                continue
            arguments = fn.get("arguments")
            if not isinstance(arguments, str):
                problems.append(f"{name}: arguments are not a string")
                continue
            problems.extend(f"{name}: {e.message}" for e in compiled.validate_json(arguments))
    return problems


def _usage(answer: Any) -> tuple[int, int]:
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return 0, 0
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (
        prompt if isinstance(prompt, int) else 0,
        completion if isinstance(completion, int) else 0,
    )


def create_app(upstream: str, record_dir: Path | None = None) -> Starlette:
    """The pass-through; with ``record_dir``, the durable record kept there."""
    target = upstream.rstrip("/") + "/chat/completions"
    session: list[aiohttp.ClientSession] = []
    records: list[DurableRecord] = []

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        session.append(aiohttp.ClientSession())
        if record_dir is not None:
            records.append(DurableRecord(record_dir))
        try:
            yield
        finally:
            await session[0].close()
            for record in records:
                record.close()

    def answer(
        status: int, body: bytes, started: float, payload: Any = None, parsed: Any = None
    ) -> Response:
        if records:  # the durable record: spooled before the answer leaves
            model = payload.get("model") if isinstance(payload, dict) else None
            prompt, completion = _usage(parsed)
            finished = time.time()
            records[0].add(
                (
                    _request_id(),
                    model if isinstance(model, str) else None,
                    status,
                    prompt,
                    completion,
                    (finished - started) * 1000,
                    started,
                    finished,
                )
            )
        return Response(body, status, media_type=_JSON)

    async def chat_completions(request: Request) -> Response:
        started = time.time() if records else 0.0
        raw = await request.body()
        try:
            payload = orjson.loads(raw)
            schemas = strict_schemas(payload)
        except orjson.JSONDecodeError:
            return answer(400, _error("the body is not JSON"), started)
        except validator.SchemaError as exc:
            return answer(400, _error(f"invalid strict schema: {exc}"), started)
        headers = {"content-type": _JSON}
        auth = request.headers.get("authorization")
        if auth is not None:
            headers["authorization"] = auth
        try:
            async with session[0].post(target, data=raw, headers=headers) as upstream_answer:
                body = await upstream_answer.read()
                status = upstream_answer.status
        except aiohttp.ClientError as exc:
            return answer(502, _error(f"upstream unreachable: {exc!r}"), started, payload)
        parsed = None
        if status == 200 and (schemas or records):  # the record wants the usage too
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError:
                return answer(502, _error("the upstream's answer is not JSON"), started, payload)
            problems = invalid_calls(parsed, schemas)
            if problems:
                return answer(
                    502,
                    _error("invalid strict tool call: " + "; ".join(problems)),
                    started,
                    payload,
                )
        return answer(status, body, started, payload, parsed)

    return Starlette(
        routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="base URL, e.g. http://127.0.0.1:8200/v1")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--record-dir",
        type=Path,
        default=None,
        help="where the spool and the SQLite file go (default: a new temp dir)",
    )
    mode.add_argument(
        "--light",
        action="store_true",
        help="no durable record: the pass-through before the 1.5x target",
    )
    ns = parser.parse_args()
    record_dir = (
        None if ns.light else (ns.record_dir or Path(tempfile.mkdtemp(prefix="baseline-record-")))
    )
    uvicorn.run(
        create_app(ns.upstream, record_dir),
        host=ns.host,
        port=ns.port,
        workers=1,
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
