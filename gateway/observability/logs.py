"""Structured logs: one JSON line per request, never a key or a prompt.

``configure_logging`` is called once, by ``syntic serve``. It installs one handler on the
root logger (so uvicorn's and every library's records pass through it) with a
``RedactingFilter`` that masks API keys (``sk_live_...``, ``sk_test_...``, ``sk_admin_...``)
and ``Bearer`` credentials wherever they appear: message, arguments, extra fields,
tracebacks.

The per-request line (logger ``syntic.access``)::

    {"ts": "2026-11-30T10:31:02.114Z", "level": "info", "logger": "syntic.access",
     "msg": "request", "request_id": "req_...", "key_id": "key_...", "model": "amara-s1.2",
     "route": "/v1/chat/completions", "status": 200, "code": null, "schema_retries": 0,
     "latency_ms": 12.4, "streamed": false}

Prompts and tool arguments are never passed to a logger by the gateway; the filter is the
second line of defence for secrets, not a licence to log request bodies.

Lines are written in batches: one ``write`` per line is a system call per request.
``BufferedStreamHandler`` holds the formatted lines emitted on a running event loop and
writes them together at most ``FLUSH_INTERVAL_S`` (2 ms) later, so a line can reach the
stream a few milliseconds after its record. It writes at once (with everything held
before, order kept) for a warning or worse, when ``FLUSH_MAX_CHARS`` are held, for a
record emitted outside an event loop (startup, other threads), when the handler is
replaced, and at interpreter exit (``logging.shutdown``): a clean exit loses nothing;
only a process killed outright (SIGKILL) can lose its last few milliseconds of lines.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Mapping
from itertools import filterfalse
from threading import get_ident
from typing import Any, Literal, TextIO

import orjson

from gateway.bounds import MASK as MASK  # the masking is shared with the ledger's rows
from gateway.bounds import redact as redact
from gateway.canonical.record import record

LogFormat = Literal["json", "text"]
ACCESS_LOGGER = "syntic.access"


# Where ``RedactingFilter`` keeps a record's extra fields (redacted) for its handler's
# formatter, which takes them off the record (``_extras``).
_EXTRAS_ATTR = "_syntic_extras"

# LogRecord attributes that are not "extra" fields.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName", _EXTRAS_ATTR}
)
_is_standard = _STANDARD_ATTRS.__contains__


_PLAIN = frozenset({int, float, bool, type(None)})


def _redact_value(value: Any) -> Any:
    """``value`` as JSON-ready data with every string in it (keys too) redacted. Any other
    object is first made JSON data as the formatter would (orjson, ``str`` for the rest),
    so nothing reaches a formatter unredacted by way of a dataclass or a ``__str__``."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    if type(value) in _PLAIN:
        return value
    try:
        data = orjson.loads(orjson.dumps(value, default=str))
    except (TypeError, orjson.JSONEncodeError):
        return redact(str(value))
    return _redact_value(data) if isinstance(data, str | dict | list) else data


class RedactingFilter(logging.Filter):
    """Masks secrets in a record before any formatter sees it. Attach to handlers: a
    handler's filters see records propagated from every logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            try:
                message = record.getMessage()
            except (TypeError, ValueError):
                message = f"{record.msg} {record.args!r}"
            record.msg, record.args = redact(message), None
        elif isinstance(record.msg, str):
            record.msg = redact(record.msg)
        else:
            record.msg = redact(str(record.msg))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        attrs = record.__dict__
        names = _extra_names(attrs)
        extras: dict[str, Any] = {}
        texts: list[str] = []
        for name in names:
            value = attrs[name]
            kind = type(value)
            if kind is str:
                texts.append(value)
            elif kind not in _PLAIN:
                value = attrs[name] = _redact_value(value)
            extras[name] = value
        # The strings redacted at once: a secret in any of them is one in the joined text,
        # so the common record, which has none, costs one redact.
        joined = "\n".join(texts)
        if redact(joined) is not joined:
            for name in names:
                value = attrs[name]
                if type(value) is str:
                    extras[name] = attrs[name] = redact(value)
        attrs[_EXTRAS_ATTR] = extras  # the formatter's, found once
        return True


_last_second: list[Any] = [-1, ""]
# A timestamp's tail by its millisecond: a lookup costs less than formatting it each line.
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))


def _iso(ts: float) -> str:
    second = int(ts)
    if second != _last_second[0]:  # strftime once per second, not once per line
        _last_second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    stamp: str = _last_second[1]
    return stamp + _MILLIS[int((ts - second) * 1000)]  # the fraction is < 1


# A record's attribute names, in order -> its extra fields' names: records come in a few
# shapes (one per call site's ``extra``), so each shape is walked once, not every record.
_names_by_keys: dict[tuple[str, ...], tuple[str, ...]] = {}
_NAMES_BY_KEYS_MAX = 256


def _extra_names(attrs: dict[str, Any]) -> tuple[str, ...]:
    """A record's extra fields' names, in the order they were set."""
    keys = tuple(attrs)
    names = _names_by_keys.get(keys)
    if names is None:
        if len(_names_by_keys) >= _NAMES_BY_KEYS_MAX:
            _names_by_keys.clear()
        names = _names_by_keys[keys] = tuple(filterfalse(_is_standard, keys))
    return names


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    attrs = record.__dict__
    # Taken off again: the record other handlers see keeps only its own attributes.
    extras: dict[str, Any] | None = attrs.pop(_EXTRAS_ATTR, None)
    if extras is None:  # not through RedactingFilter
        extras = {k: attrs[k] for k in _extra_names(attrs)}
    return extras


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, extra fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_extras(record))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """Human-readable: ``ts LEVEL logger msg k=v ...``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        out = f"{_iso(record.created)} {record.levelname} {record.name} {record.getMessage()}"
        if fields:
            out = f"{out} {fields}"
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out = f"{out}\n{record.exc_text}"
        return out


_HANDLER_NAME = "syntic"
FLUSH_INTERVAL_S = 0.002
FLUSH_MAX_CHARS = 64 * 1024


class BufferedStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` that writes lines in batches (module docstring): records
    emitted on a running event loop are held up to ``interval_s``; warnings and worse,
    records from outside a loop, and ``flush()`` write everything held, in order."""

    def __init__(
        self,
        stream: TextIO | None = None,
        interval_s: float = FLUSH_INTERVAL_S,
        max_chars: int = FLUSH_MAX_CHARS,
    ) -> None:
        super().__init__(stream)
        self.interval_s = interval_s
        self.max_chars = max_chars
        self._held: list[str] = []
        self._held_chars = 0
        # The loop a write is scheduled on (call_later), None when none is. A stale timer
        # (after an early flush) only causes one more, empty, flush.
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._timer_thread = 0  # the thread the timer's loop runs in

    def emit(self, record: logging.LogRecord) -> None:  # called with self.lock held
        try:
            self._hold(self.format(record), record.levelno)
        except RecursionError:  # as StreamHandler.emit
            raise
        except Exception:
            self.handleError(record)

    def _hold(self, line: str, levelno: int) -> None:
        self._held.append(line)
        self._held_chars += len(line)
        if levelno >= logging.WARNING or self._held_chars >= self.max_chars:
            self.flush()
            return
        timer_loop = self._timer_loop
        # A write is already due on the loop running in this thread (a thread runs one
        # loop at a time): asked this way, not by get_running_loop(), which on CPython
        # 3.11 makes a getpid() system call each time.
        if timer_loop is not None and self._timer_thread == get_ident() and timer_loop.is_running():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: nothing would come back for it
            self.flush()
            return
        if timer_loop is not loop:
            if timer_loop is not None:
                self.flush()  # held for another (perhaps closed) loop: write them now
            loop.call_later(self.interval_s, self._on_timer)
            self._timer_loop, self._timer_thread = loop, get_ident()

    def _on_timer(self) -> None:
        self.acquire()
        try:
            self._timer_loop = None
            self.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": "buffered log lines not written"}))
        finally:
            self.release()

    def flush(self) -> None:
        """Write every held line (one ``write``), then flush the stream."""
        self.acquire()
        try:
            self._timer_loop = None
            stream = self.stream
            if self._held:
                text = "\n".join(self._held) + "\n"
                self._held.clear()
                self._held_chars = 0
                stream.write(text)
            if stream and hasattr(stream, "flush"):
                stream.flush()
        finally:
            self.release()


def log_format_from_env(env: Mapping[str, str]) -> LogFormat:
    """``SYNTIC_LOG_FORMAT`` (``json`` or ``text``; default ``json``)."""
    value = env.get("SYNTIC_LOG_FORMAT", "json").strip().lower() or "json"
    if value not in ("json", "text"):
        raise ValueError(f"SYNTIC_LOG_FORMAT must be json or text, not {value!r}")
    return "json" if value == "json" else "text"


def configure_logging(
    level: str = "info", fmt: LogFormat = "json", stream: TextIO | None = None
) -> logging.Handler:
    """Install the gateway's one handler on the root logger (replacing a previous one).

    Idempotent: calling it again swaps the handler rather than adding a second (the
    replaced one writes what it holds first). Lines are batched: ``BufferedStreamHandler``.
    """
    if fmt not in ("json", "text"):
        raise ValueError(f"log format must be json or text, not {fmt!r}")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
        old.flush()
    handler = BufferedStreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Neither formatter shows thread or process names; not collecting them makes every
    # record (one per request) cheaper.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # uvicorn installs its own handlers only when given a log_config; route its records to
    # ours instead, and drop its access log (the gateway writes its own request line).
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    return handler


@record
class RequestLog:
    """The fields of the per-request log line. No secret, no prompt, no arguments."""

    request_id: str
    route: str
    status: int
    latency_ms: float
    key_id: str | None = None
    model: str | None = None
    code: str | None = None
    schema_retries: int = 0
    streamed: bool = False


_access = logging.getLogger(ACCESS_LOGGER)


def log_request(entry: RequestLog) -> None:
    """Emit the per-request line on ``syntic.access`` (info; warning for 5xx), through
    ``logging``'s own record path: the record factory, the logger's filters, its
    handlers and theirs all see it."""
    level = logging.WARNING if entry.status >= 500 else logging.INFO
    if not _access.isEnabledFor(level):
        return
    # ``Logger.log`` would walk the stack for the caller on every line: its answer is
    # known (this function), so the record is made and handled as ``Logger.log`` does.
    record = _access.makeRecord(
        ACCESS_LOGGER,
        level,
        _SOURCE.co_filename,
        _SOURCE.co_firstlineno,
        "request",
        (),
        None,
        "log_request",
    )
    # As ``extra`` would set them; none of these names is a record attribute.
    record.__dict__.update(
        {
            "request_id": entry.request_id,
            "key_id": entry.key_id,
            "model": entry.model,
            "route": entry.route,
            "status": entry.status,
            "code": entry.code,
            "schema_retries": entry.schema_retries,
            "latency_ms": round(entry.latency_ms, 3),
            "streamed": entry.streamed,
        }
    )
    _access.handle(record)


_SOURCE = log_request.__code__  # where the access record says it was made
