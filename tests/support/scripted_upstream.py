"""A real HTTP/1.1 server on 127.0.0.1 (free port) that replays a script of model behaviour.

Tests queue *steps*; each incoming request consumes the next one::

    with ScriptedUpstream() as up:                     # or the ``scripted_upstream`` fixture
        up.queue(
            Reply(tool_calls=[Call("create_refund", '{"amount_pence": "12"}')]),
            Reply(tool_calls=[Call("create_refund", '{"amount_pence": 12}')], usage=(30, 7)),
        )
        ... point a gateway model at up.base_url (".../v1") ...
        up.requests[1].body["tool_choice"]            # what the gateway sent

Steps:

- ``Reply(content=..., tool_calls=[Call(name, raw_arguments, id=None)], finish_reason=None,
  usage=(prompt, completion), delay=0, content_after=None, details=None,
  report_usage=True)``: a completion (``content_after``: streamed text chunks after the
  tool calls; OpenAI wire only). ``usage`` counts as OpenAI does (the prompt includes
  cached tokens); ``details=Tokens(cache_read, cache_write, reasoning)`` adds the wire's
  cache and reasoning fields; ``report_usage=False`` leaves usage out of the answer and
  the stream.
  ``finish_reason`` defaults to ``tool_calls`` / ``stop``. ``refusal``: the model refuses
  with this text (chat ``message.refusal``, a Responses ``refusal`` part, Anthropic
  ``stop_reason: "refusal"`` after the text). Answer fields: ``logprobs`` (chat: each
  content fragment's ``token_logprobs``), ``service_tier``, ``system_fingerprint``;
  ``thinking`` (Anthropic ``Thinking`` blocks before the content), ``reasoning``
  (Responses ``ReasoningItem``s before the output), ``items`` (``Item``: parts the gateway
  passes through whole, in the wire's own spelling, each at its place), ``container``
  (Anthropic). If the request has
  ``"stream": true`` the same step is sent as SSE chunks: text and arguments split into
  ``fragment`` characters, ``chunk_delay`` between chunks, ``stall_after=N`` (send N
  chunks then go silent until the client leaves) or ``drop_after=N`` (send N chunks then
  close the connection); ``gate=threading.Event()`` with ``gate_at=b"..."``: pause before
  the first chunk containing ``gate_at`` until the test sets the gate (the connection is
  reset if it is not set within ``GATE_WAIT_S``, so a gate never opened fails the call
  instead of letting it finish as if it had been).
- ``HttpError(status, body=None, delay=0)``: an error status with a JSON body (a
  provider-style error object by default).
- ``after=N`` on a ``Reply`` or ``HttpError``: answer only once N requests have arrived
  (counting this one), e.g. fail one of ``n`` concurrent choices only when all of them are
  in; ``held=True``: answer only once the test calls ``up.release()`` (calls kept in flight
  while the test looks at the gateway). The client leaving first ends either wait.
- ``Hang()``: never answer; the connection is held until the client leaves (a choice the
  gateway must cancel).
- ``Drop(delay=0, reset=True)``: close the connection without answering (TCP reset when
  ``reset``), after ``delay`` seconds.
- ``Raw(body, status=200, content_type="application/json", headers={}, delay=0)``: exactly
  these bytes as the answer (malformed JSON, odd shapes, ``retry-after`` headers, ...).
- ``RawStream(events, chunk_delay=0, stall=False, drop=False)``: a 200 SSE response made of
  these byte strings verbatim (broken framing, bad chunks), then the end of the body, or
  silence until the client leaves (``stall``), or a reset (``drop``).

An empty script answers 500 ``script exhausted`` (so a test sees the unexpected call),
unless a ``responder`` is set (``ScriptedUpstream(responder=fn)`` or ``up.responder = fn``):
then ``fn(request) -> Step`` picks each step from the request itself, for concurrent tests
where a queue's order can't be relied on.

``in_flight`` is the number of requests being answered right now and ``max_in_flight``
the most there ever were at once (since ``reset``): what the gateway sent concurrently.

Every request is recorded as ``RecordedRequest(method, path, headers, body, raw)`` (and
``received_at``, ``time.monotonic()``), with
``client_disconnected`` set when the client went away before the response finished;
``wait_for_disconnect(i, timeout)`` waits for that.

Rendering is pluggable by path: ``renderers`` maps a path suffix (``"/chat/completions"``)
to a ``Renderer`` (``render(step, request, seq) -> bytes`` for a JSON body,
``render_stream(step, request, seq) -> list[bytes]`` of complete SSE events, and
``error_body(step) -> bytes``). Add another wire format with
``ScriptedUpstream(renderers={**OPENAI_RENDERERS, "/messages": MyRenderer()})`` or
``up.renderers["/messages"] = MyRenderer()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call in a scripted reply; ``arguments`` is sent verbatim (it may be broken)."""

    name: str
    arguments: str
    id: str | None = None
    namespace: str | None = None  # Responses: the namespace tool the function is in


@dataclass(frozen=True, slots=True)
class Tokens:
    """A scripted reply's usage details: parts of ``Reply.usage``'s prompt (read from /
    written to the prompt cache) and of its completion (reasoning). Each renderer writes
    them in its wire's fields."""

    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


@dataclass(frozen=True, slots=True)
class Thinking:
    """An Anthropic ``thinking`` block, or (``redacted``) a ``redacted_thinking`` block whose
    ``data`` is ``text``."""

    text: str
    signature: str = "sig-scripted"
    redacted: bool = False


@dataclass(frozen=True, slots=True)
class ReasoningItem:
    """A Responses ``reasoning`` output item."""

    id: str
    summary: tuple[str, ...] = ()
    encrypted_content: str | None = None


@dataclass(frozen=True, slots=True)
class Item:
    """A part of a reply the gateway passes through whole, as one wire spells it: a
    Responses output item (``web_search_call``, ``custom_tool_call``, ...), an Anthropic
    content block (``server_tool_use``, ``web_search_tool_result``, ...), a chat tool call
    (``"type": "custom"``). ``at``: its place among the reply's other parts as the renderer
    orders them (reasoning or thinking, the message or text, the calls), from 0 (first);
    past the end: last."""

    raw: dict[str, Any]
    at: int = 0


def placed(
    parts: list[Any], items: Iterable[Item], render: Callable[[dict[str, Any]], Any] = dict
) -> list[Any]:
    """``parts`` with each item (``render(raw)``) at its ``at``, items at one place in
    order."""
    out: list[Any] = []
    waiting = list(items)
    for i, part in enumerate(parts):
        out.extend(render(item.raw) for item in waiting if item.at == i)
        out.append(part)
    out.extend(render(item.raw) for item in waiting if item.at >= len(parts))
    return out


def token_logprobs(text: str, fragment: int) -> list[dict[str, Any]]:
    """Chat ``logprobs.content`` for ``text``: one token per ``fragment`` characters."""
    return [
        {"token": p, "logprob": -0.25, "bytes": list(p.encode()), "top_logprobs": []}
        for p in pieces(text, fragment)
        if p
    ]


@dataclass(frozen=True, slots=True)
class Reply:
    content: str | None = None
    tool_calls: tuple[Call, ...] | list[Call] = ()
    finish_reason: str | None = None
    # (prompt, completion) as OpenAI counts them: the prompt includes the cached tokens
    usage: tuple[int, int] = (10, 5)
    delay: float = 0.0
    fragment: int = 8
    chunk_delay: float = 0.0
    stall_after: int | None = None
    drop_after: int | None = None
    id: str | None = None
    content_after: str | None = None  # streamed text after the tool calls
    details: Tokens | None = None  # cache and reasoning counts in the wire's usage
    report_usage: bool = True  # False: an engine that sends no usage at all
    refusal: str | None = None
    logprobs: bool = False
    service_tier: str | None = None
    system_fingerprint: str | None = None
    thinking: tuple[Thinking, ...] = ()
    reasoning: tuple[ReasoningItem, ...] = ()
    items: tuple[Item, ...] = ()
    container: dict[str, Any] | None = None  # Anthropic's code-execution container
    gate: threading.Event | None = None  # streamed: pause before the chunk with ``gate_at``
    gate_at: bytes = b""
    after: int = 0  # answer once this many requests have arrived
    held: bool = False  # answer once the test calls ``release()``

    @property
    def finish(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True, slots=True)
class HttpError:
    status: int
    body: Any = None
    delay: float = 0.0
    after: int = 0
    held: bool = False


@dataclass(frozen=True, slots=True)
class Hang:
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Drop:
    delay: float = 0.0
    reset: bool = True


@dataclass(frozen=True, slots=True)
class Raw:
    body: bytes
    status: int = 200
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class RawStream:
    events: tuple[bytes, ...] | list[bytes]
    chunk_delay: float = 0.0
    stall: bool = False
    drop: bool = False
    delay: float = 0.0


Step = Reply | HttpError | Drop | Raw | RawStream | Hang


@dataclass(slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None
    received_at: float = field(default_factory=time.monotonic)
    client_disconnected: bool = False
    finished: threading.Event = field(default_factory=threading.Event)


class Renderer(Protocol):
    def render(self, step: Reply, request: RecordedRequest, seq: int) -> bytes: ...
    def render_stream(self, step: Reply, request: RecordedRequest, seq: int) -> list[bytes]: ...
    def error_body(self, step: HttpError) -> bytes: ...
    # A provider's own 400 for a request it refuses whatever the script says (the body), or
    # None; a refused request is recorded but takes no step.
    def refusal(self, request: RecordedRequest) -> bytes | None: ...


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into ``size``-character fragments (at least one, possibly empty)."""
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sse(payload: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return head + b"data: " + data + b"\n\n"


class OpenAIRenderer:
    """The chat-completions wire format (``chat.completion`` / ``chat.completion.chunk``)."""

    def _ids(self, step: Reply, seq: int) -> tuple[str, list[str]]:
        rid = step.id or f"chatcmpl-scripted-{seq}"
        return rid, [c.id or f"call_{seq}_{i}" for i, c in enumerate(step.tool_calls)]

    def render(self, step: Reply, request: RecordedRequest, seq: int) -> bytes:
        rid, call_ids = self._ids(step, seq)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": step.content,
            "refusal": step.refusal,
        }
        calls = placed(
            [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for cid, c in zip(call_ids, step.tool_calls, strict=True)
            ],
            step.items,
        )
        if calls:
            message["tool_calls"] = calls
        body: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": (request.body or {}).get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": step.finish,
                    "logprobs": self._logprobs(step, step.content or ""),
                }
            ],
            "usage": self.usage(step),
            "system_fingerprint": step.system_fingerprint,
            **({"service_tier": step.service_tier} if step.service_tier else {}),
        }
        if not step.report_usage:
            del body["usage"]
        return orjson.dumps(body)

    @staticmethod
    def usage(step: Reply) -> dict[str, Any]:
        """``usage`` as ``openai.types.CompletionUsage``."""
        prompt, completion = step.usage
        out: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if step.details is not None:
            d = step.details
            out["prompt_tokens_details"] = {
                "cached_tokens": d.cache_read,
                "cache_write_tokens": d.cache_write,
                "audio_tokens": 0,
            }
            out["completion_tokens_details"] = {"reasoning_tokens": d.reasoning, "audio_tokens": 0}
        return out

    @staticmethod
    def _logprobs(step: Reply, text: str) -> dict[str, Any] | None:
        if not step.logprobs:
            return None
        return {"content": token_logprobs(text, step.fragment), "refusal": None}

    def render_stream(self, step: Reply, request: RecordedRequest, seq: int) -> list[bytes]:
        rid, call_ids = self._ids(step, seq)
        body = request.body or {}
        usage_on = bool((body.get("stream_options") or {}).get("include_usage"))
        created = int(time.time())
        model = body.get("model", "scripted")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            text = delta.get("content")
            logprobs = self._logprobs(step, text) if isinstance(text, str) and text else None
            out: dict[str, Any] = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": step.system_fingerprint,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
                ],
            }
            if step.service_tier:
                out["service_tier"] = step.service_tier
            if usage_on:
                out["usage"] = None
            return sse(out)

        events = [chunk({"role": "assistant", "content": "", "refusal": None})]
        if step.content:
            events.extend(chunk({"content": p}) for p in pieces(step.content, step.fragment))
        if step.refusal:
            events.extend(chunk({"refusal": p}) for p in pieces(step.refusal, step.fragment))
        calls = placed(
            [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for cid, c in zip(call_ids, step.tool_calls, strict=True)
            ],
            step.items,
        )
        for i, call in enumerate(calls):
            # A custom tool's call streams its input as a function's arguments stream.
            kind = call["type"]
            body_key, text_key = (
                ("custom", "input") if kind == "custom" else ("function", "arguments")
            )
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call["id"],
                                "type": kind,
                                body_key: {"name": call[body_key]["name"], text_key: ""},
                            }
                        ]
                    }
                )
            )
            events.extend(
                chunk({"tool_calls": [{"index": i, body_key: {text_key: p}}]})
                for p in pieces(call[body_key][text_key], step.fragment)
                if p
            )
        if step.content_after:
            events.extend(chunk({"content": p}) for p in pieces(step.content_after, step.fragment))
        events.append(chunk({}, step.finish))
        if usage_on and step.report_usage:
            events.append(
                sse(
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "system_fingerprint": None,
                        "choices": [],
                        "usage": self.usage(step),
                    }
                )
            )
        events.append(b"data: [DONE]\n\n")
        return events

    def refusal(self, request: RecordedRequest) -> bytes | None:
        return None

    def error_body(self, step: HttpError) -> bytes:
        if step.body is not None:
            return step.body if isinstance(step.body, bytes) else orjson.dumps(step.body)
        return orjson.dumps(
            {
                "error": {
                    "message": f"scripted error {step.status}",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        )


OPENAI_RENDERERS: Mapping[str, Renderer] = {"/chat/completions": OpenAIRenderer()}

GATE_WAIT_S = 10.0

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class ScriptedUpstream:
    """The server (see module docstring). Runs its own event loop in a daemon thread, so
    sync and async tests can both use it."""

    def __init__(
        self,
        renderers: Mapping[str, Renderer] | None = None,
        responder: Callable[[RecordedRequest], Step] | None = None,
    ) -> None:
        self.renderers: dict[str, Renderer] = dict(renderers or OPENAI_RENDERERS)
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self._seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._arrival: asyncio.Event | None = None  # set (and replaced) on each arrival
        self._released = False
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0

    # -- script -----------------------------------------------------------------------------
    def queue(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def reset(self) -> None:
        """Forget queued steps, recorded requests and the responder (between tests)."""
        with self._lock:
            self._steps.clear()
            self.requests.clear()
            self.responder = None
            self.max_in_flight = self.in_flight
            self._released = False

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._steps)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def bodies(self) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests]

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= n:
                    return list(self.requests)
            time.sleep(0.01)
        raise TimeoutError(f"expected {n} upstream requests, got {len(self.requests)}")

    def wait_for_disconnect(self, index: int, timeout: float = 5.0) -> bool:
        req = self.wait_for_requests(index + 1, timeout)[index]
        req.finished.wait(timeout)
        return req.client_disconnected

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> ScriptedUpstream:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stop = asyncio.Event()
            self._arrival = asyncio.Event()

            async def main() -> None:
                self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
                self.port = self._server.sockets[0].getsockname()[1]
                ready.set()
                assert self._stop is not None
                await self._stop.wait()
                self._server.close()
                for task in asyncio.all_tasks() - {asyncio.current_task()}:
                    task.cancel()

            loop.run_until_complete(main())
            loop.close()

        self._thread = threading.Thread(target=run, name="scripted-upstream", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted upstream did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ----------------------------------------------------------------------------
    def _next(self, request: RecordedRequest) -> tuple[Step | None, int]:
        with self._lock:
            self.requests.append(request)
            self._seq += 1
            seq = self._seq
            if self._steps:
                return self._steps.popleft(), seq
            responder = self.responder
        return (responder(request) if responder is not None else None), seq

    def release(self) -> None:
        """Let every ``held`` step answer (from any thread)."""
        assert self._loop is not None

        def now() -> None:
            self._released = True
            self._arrived()

        self._loop.call_soon_threadsafe(now)

    def _arrived(self) -> None:
        arrival = self._arrival
        assert arrival is not None
        self._arrival = asyncio.Event()
        arrival.set()

    async def _left_before(self, ready: Callable[[], bool], reader: asyncio.StreamReader) -> bool:
        """Wait until ``ready()`` (checked on each arrival and on ``release``); True if the
        client left first."""
        left = asyncio.ensure_future(reader.read(1))
        try:
            while True:
                if ready():
                    return False
                arrival = self._arrival
                assert arrival is not None
                arrived = asyncio.ensure_future(arrival.wait())
                done, _ = await asyncio.wait({left, arrived}, return_when=asyncio.FIRST_COMPLETED)
                arrived.cancel()
                if left in done:
                    return True
        finally:
            # the read must be gone before the caller reads the next request: a cancelled
            # task keeps the reader's waiter until it has run, and readuntil refuses then
            left.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await left

    def _renderer(self, path: str) -> Renderer | None:
        for suffix, renderer in self.renderers.items():
            if path.endswith(suffix):
                return renderer
        return None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                with self._lock:
                    self.in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    keep = await self._respond(request, reader, writer)
                finally:
                    with self._lock:
                        self.in_flight -= 1
                request.finished.set()
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _respond(
        self, request: RecordedRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        renderer = self._renderer(request.path)
        refused = renderer.refusal(request) if renderer is not None else None
        if refused is not None:
            with self._lock:
                self.requests.append(request)
            await _send(writer, 400, "application/json", refused)
            return True
        step, seq = self._next(request)
        self._arrived()
        if step is None or renderer is None:
            what = "script exhausted" if step is None else f"no renderer for {request.path}"
            body = orjson.dumps(
                {"error": {"message": f"scripted upstream: {what}", "type": "server_error"}}
            )
            await _send(writer, 500, "application/json", body)
            return True
        if step.delay and await _client_left(reader, step.delay):
            request.client_disconnected = True
            return False
        if isinstance(step, Hang):
            await reader.read(1)
            request.client_disconnected = True
            return False
        if isinstance(step, Reply | HttpError) and (step.after or step.held):
            after, held = step.after, step.held

            def ready() -> bool:
                with self._lock:
                    return len(self.requests) >= after and (self._released or not held)

            if await self._left_before(ready, reader):
                request.client_disconnected = True
                return False
        if isinstance(step, Drop):
            if step.reset:
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if isinstance(step, HttpError):
            await _send(writer, step.status, "application/json", renderer.error_body(step))
            return True
        if isinstance(step, Raw):
            await _send(writer, step.status, step.content_type, step.body, step.headers)
            return True
        if isinstance(step, RawStream):
            return await _raw_stream(step, request, reader, writer)
        if isinstance(request.body, dict) and request.body.get("stream"):
            return await self._stream(step, request, seq, renderer, reader, writer)
        await _send(writer, 200, "application/json", renderer.render(step, request, seq))
        return True

    async def _stream(
        self,
        step: Reply,
        request: RecordedRequest,
        seq: int,
        renderer: Renderer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            # one stream per connection (see below): say so, or a pooled client may reuse
            # the connection as this side closes it (a spurious reset on the next call)
            "transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        writer.write(head.encode())
        gone = asyncio.ensure_future(reader.read(1))
        try:
            for n, event in enumerate(renderer.render_stream(step, request, seq)):
                if step.drop_after is not None and n >= step.drop_after:
                    writer.transport.abort()
                    return False
                if step.stall_after is not None and n >= step.stall_after:
                    await gone
                    request.client_disconnected = True
                    return False
                gated = step.gate is not None and step.gate_at in event
                if gated and not await _gate_opened(step.gate, gone):  # type: ignore[arg-type]
                    writer.transport.abort()
                    request.client_disconnected = gone.done()
                    return False
                if gone.done():
                    request.client_disconnected = True
                    return False
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                if step.chunk_delay:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(gone), step.chunk_delay)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            request.client_disconnected = True
            return False
        finally:
            if not gone.done():
                gone.cancel()
        return False  # one stream per connection keeps the reader simple


async def _gate_opened(gate: threading.Event, gone: asyncio.Future[bytes]) -> bool:
    """Wait for the test to set ``gate``: False if the client left or it took too long."""
    deadline = time.monotonic() + GATE_WAIT_S
    while not gate.is_set():
        if gone.done() or time.monotonic() > deadline:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(gone), 0.01)
    return True


async def _client_left(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Wait ``seconds``; True if the client closed the connection meanwhile."""
    try:
        data = await asyncio.wait_for(reader.read(1), seconds)
    except TimeoutError:
        return False
    return data == b""


async def _raw_stream(
    step: RawStream,
    request: RecordedRequest,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> bool:
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    try:
        for event in step.events:
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            if step.chunk_delay:
                await asyncio.sleep(step.chunk_delay)
        if step.drop:
            writer.transport.abort()
            return False
        if step.stall:
            await reader.read(1)
            request.client_disconnected = True
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    except ConnectionError:
        request.client_disconnected = True
    return False


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    ctype: str,
    body: bytes,
    headers: Mapping[str, str] | None = None,
) -> None:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\ncontent-type: {ctype}\r\n"
        f"content-length: {len(body)}\r\n{extra}\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        raw = b"".join([part async for part in _chunks(reader)])
    else:
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
    body: Any = None
    if raw:
        with contextlib.suppress(orjson.JSONDecodeError):
            body = orjson.loads(raw)
    return RecordedRequest(method, path.split("?", 1)[0], headers, raw, body)


async def _chunks(reader: asyncio.StreamReader) -> Any:
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return
        yield await reader.readexactly(size)
        await reader.readexactly(2)


def calls(*pairs: tuple[str, str] | Call) -> tuple[Call, ...]:
    """Shorthand: ``calls(("f", '{"a": 1}'), ("g", "{}"))``."""
    return tuple(p if isinstance(p, Call) else Call(*p) for p in pairs)


def messages_of(body: Any) -> list[dict[str, Any]]:
    return list((body or {}).get("messages") or [])


def without(body: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """A copy of ``body`` without ``keys`` (to assert "nothing else changed")."""
    drop = set(keys)
    return {k: v for k, v in body.items() if k not in drop}
