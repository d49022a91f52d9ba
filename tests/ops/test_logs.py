"""Structured logs: redaction everywhere, one JSON line per request."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.observability.logs import (
    RequestLog,
    configure_logging,
    log_format_from_env,
    log_request,
    redact,
)

CANARY = "sk_live_CanaryZ9q8W7e6R5t4Y3u2I1o0"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    level = root.level
    buf = io.StringIO()
    handler = configure_logging("debug", "json", stream=buf)
    yield buf
    root.removeHandler(handler)
    root.setLevel(level)


def _lines(buf: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk_live_abcDEF123 used", "key sk_live_[REDACTED] used"),
        ("sk_test_x1 and sk_admin_Y2", "sk_test_[REDACTED] and sk_admin_[REDACTED]"),
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer [REDACTED]"),
        ("authorization: bearer   tok123, next", "authorization: bearer   [REDACTED], next"),
        ('{"h": "Bearer tok"}', '{"h": "Bearer [REDACTED]"}'),
        ("nothing secret here", "nothing secret here"),
        ("sk_other_abc stays", "sk_other_abc stays"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "emit",
    [
        lambda lg: lg.info("presented %s", CANARY),
        lambda lg: lg.info(f"presented {CANARY}"),
        lambda lg: lg.warning("header %r", {"authorization": f"Bearer {CANARY}"}),
        lambda lg: lg.info("extra", extra={"auth": CANARY, "nested": {"k": [CANARY]}}),
        lambda lg: lg.error("boom", exc_info=ValueError(f"bad key {CANARY}")),
        lambda lg: lg.info("stack", stack_info=True, extra={"k": CANARY}),
    ],
)
def test_no_record_shape_leaks_the_key(captured: io.StringIO, emit: object) -> None:
    emit(logging.getLogger("some.library"))  # type: ignore[operator]
    out = captured.getvalue()
    assert out, "nothing was logged"
    assert CANARY not in out
    assert "CanaryZ9q8" not in out
    assert "[REDACTED]" in out


@dataclass
class _Presented:
    key: str


class _Shown:
    def __str__(self) -> str:
        return f"shown {CANARY}"


@pytest.mark.parametrize("fmt", ["json", "text"])
@pytest.mark.parametrize(
    "extra",
    [
        {"obj": _Presented(CANARY)},  # orjson writes a dataclass's fields itself
        {"obj": _Shown()},  # the formatters fall back to str()
        {"obj": {CANARY: 1}},  # a key of a dict
        {"obj": ({"k": _Shown()},)},  # nested
    ],
)
def test_extras_of_any_type_are_redacted(fmt: str, extra: dict[str, object]) -> None:
    root = logging.getLogger()
    level = root.level
    buf = io.StringIO()
    handler = configure_logging("info", fmt, stream=buf)  # type: ignore[arg-type]
    try:
        logging.getLogger("some.library").info("object", extra=extra)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    out = buf.getvalue()
    assert "object" in out
    assert "CanaryZ9q8" not in out
    assert "[REDACTED]" in out


def test_extra_fields_keep_each_records_own_names_and_order(captured: io.StringIO) -> None:
    lg = logging.getLogger("some.library")
    for _ in range(2):  # the second of each shape is the one whose names were seen before
        lg.info("a", extra={"x": 1, "y": CANARY})
        lg.info("b", extra={"y": 2, "x": 3})
        lg.info("c", extra={"x": 4})
    fields = [
        [k for k in line if k not in ("ts", "level", "logger", "msg")] for line in _lines(captured)
    ]
    assert fields == [["x", "y"], ["y", "x"], ["x"]] * 2
    assert CANARY not in captured.getvalue()
    # More shapes than are remembered: each record still gets its own names.
    for i in range(300):
        lg.info("many", extra={f"f{i}": CANARY})
    last = _lines(captured)[-1]
    assert last["f299"] == "sk_live_[REDACTED]" and "f298" not in last


@pytest.mark.parametrize(
    "extra",
    [
        {"a": "plain", "b": f"key {CANARY}", "c": "also plain", "n": 3},  # one of several
        {"a": "Bearer", "b": "tok", "c": None},  # joined, these would read as a credential
        {"a": "sk_live_", "b": "x"},
    ],
)
def test_each_string_extra_is_redacted_on_its_own(
    captured: io.StringIO, extra: dict[str, object]
) -> None:
    logging.getLogger("some.library").info("x", extra=extra)
    (line,) = _lines(captured)
    assert {k: line[k] for k in extra} == {
        k: redact(v) if isinstance(v, str) else v for k, v in extra.items()
    }


def test_the_timestamp_keeps_its_millisecond_digits() -> None:
    from gateway.observability.logs import _iso

    for ts, tail in [(0.0, "00:00:00.000Z"), (5.0009, "00:00:05.000Z"), (7.25, "00:00:07.250Z")]:
        assert _iso(ts) == f"1970-01-01T{tail}"
    assert _iso(1_700_000_000.9999) == "2023-11-14T22:13:20.999Z"


def test_request_line_shape(captured: io.StringIO) -> None:
    log_request(
        RequestLog(
            request_id="req_1",
            route="/v1/chat/completions",
            status=422,
            latency_ms=12.34567,
            key_id="key_1",
            model="amara",
            code="tool_arguments_invalid",
            schema_retries=1,
            streamed=False,
        )
    )
    (line,) = _lines(captured)
    assert line["msg"] == "request"
    assert line["logger"] == "syntic.access"
    assert line["level"] == "info"
    assert {
        k: line[k]
        for k in (
            "request_id",
            "key_id",
            "model",
            "route",
            "status",
            "code",
            "schema_retries",
            "latency_ms",
            "streamed",
        )
    } == {
        "request_id": "req_1",
        "key_id": "key_1",
        "model": "amara",
        "route": "/v1/chat/completions",
        "status": 422,
        "code": "tool_arguments_invalid",
        "schema_retries": 1,
        "latency_ms": 12.346,
        "streamed": False,
    }
    assert str(line["ts"]).endswith("Z")


def test_5xx_request_line_is_a_warning(captured: io.StringIO) -> None:
    log_request(RequestLog(request_id="r", route="/v1/messages", status=502, latency_ms=1))
    (line,) = _lines(captured)
    assert line["level"] == "warning"
    assert line["code"] is None


def test_text_format_and_idempotent_configure() -> None:
    root = logging.getLogger()
    level = root.level
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "text", stream=first)
    handler = configure_logging("info", "text", stream=second)
    try:
        logging.getLogger("x").info("hello %s", CANARY, extra={"n": 1})
        assert first.getvalue() == ""  # replaced, not duplicated
        out = second.getvalue()
        assert "INFO x hello sk_live_[REDACTED] n=1" in out
        assert out.count("hello") == 1
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_bad_format_refused() -> None:
    with pytest.raises(ValueError):
        configure_logging("info", "xml")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "json"),
        ({"SYNTIC_LOG_FORMAT": "text"}, "text"),
        ({"SYNTIC_LOG_FORMAT": " JSON "}, "json"),
    ],
)
def test_log_format_from_env(env: dict[str, str], expected: str) -> None:
    assert log_format_from_env(env) == expected


def test_log_format_from_env_refuses_unknown() -> None:
    with pytest.raises(ValueError):
        log_format_from_env({"SYNTIC_LOG_FORMAT": "xml"})


def test_client_supplied_fields_in_the_request_line_are_redacted(captured: io.StringIO) -> None:
    # "model" comes from the client: a key pasted there must not reach the log
    log_request(
        RequestLog(
            request_id="r",
            route="/v1/messages",
            status=404,
            latency_ms=1,
            model=f"oops {CANARY}",
            code="model_not_found",
        )
    )
    (line,) = _lines(captured)
    assert line["model"] == "oops sk_live_[REDACTED]"
    assert CANARY not in captured.getvalue()


# -- batched writes ---------------------------------------------------------------


def _line(buf: io.StringIO) -> list[str]:
    lines = [json.loads(x) for x in buf.getvalue().splitlines() if x]
    return [x["msg"] for x in lines if x["logger"] in ("syntic.test", "syntic.access")]


def test_lines_on_a_loop_are_written_together_a_few_ms_later(captured: io.StringIO) -> None:
    lg = logging.getLogger("syntic.test")

    async def main() -> tuple[list[str], list[str]]:
        for i in range(5):
            lg.info("line %d", i)
        held = _line(captured)
        await asyncio.sleep(0.05)  # FLUSH_INTERVAL_S is 2 ms
        return held, _line(captured)

    held, written = asyncio.run(main())
    assert held == []  # batched, not one write per line
    assert written == [f"line {i}" for i in range(5)]


def test_a_warning_writes_everything_held_at_once_in_order(captured: io.StringIO) -> None:
    lg = logging.getLogger("syntic.test")

    async def main() -> list[str]:
        lg.info("first")
        log_request(RequestLog(request_id="r", route="/v1/messages", status=200, latency_ms=1))
        lg.warning("bad")
        return _line(captured)

    assert asyncio.run(main()) == ["first", "request", "bad"]


def test_a_line_from_another_thread_is_written_at_once_while_a_loop_holds_lines(
    captured: io.StringIO,
) -> None:
    lg = logging.getLogger("syntic.test")

    async def main() -> list[str]:
        lg.info("on the loop")  # held: a write is due on this loop
        worker = threading.Thread(target=lg.info, args=("from a thread",))
        worker.start()
        worker.join()
        return _line(captured)

    assert asyncio.run(main()) == ["on the loop", "from a thread"]


def test_lines_outside_a_loop_are_written_at_once(captured: io.StringIO) -> None:
    logging.getLogger("syntic.test").info("now")
    assert _line(captured) == ["now"]


def test_a_full_buffer_is_written_without_waiting(captured: io.StringIO) -> None:
    lg = logging.getLogger("syntic.test")
    big = "x" * 1000

    async def main() -> int:
        for _ in range(100):  # ~100 KB > FLUSH_MAX_CHARS
            lg.info(big)
        return len(_line(captured))

    written = asyncio.run(main())
    assert 50 <= written < 100  # written in the loop, before the timer could fire
    logging.getLogger("syntic.test").info("after")  # outside a loop: writes the rest
    assert len(_line(captured)) == 101


def test_lines_held_for_a_closed_loop_are_written_by_the_next_one(
    captured: io.StringIO,
) -> None:
    lg = logging.getLogger("syntic.test")

    async def log(msg: str) -> list[str]:
        lg.info(msg)
        return _line(captured)

    # Both made first: making a loop logs (debug) outside a loop, which writes at once.
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    assert first.run_until_complete(log("a")) == []
    first.close()  # before its 2 ms timer fired: "a" is still held
    try:
        assert second.run_until_complete(log("b")) == ["a", "b"]  # written when "b" came
    finally:
        second.close()


def test_replacing_the_handler_writes_what_it_held() -> None:
    root = logging.getLogger()
    level = root.level
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "json", stream=first)

    async def main() -> None:
        logging.getLogger("syntic.test").info("held")
        configure_logging("info", "json", stream=second)

    try:
        asyncio.run(main())
        assert _line(first) == ["held"]
    finally:
        for h in [h for h in root.handlers if h.get_name() == "syntic"]:
            root.removeHandler(h)
        root.setLevel(level)


def test_nothing_is_lost_on_a_clean_exit() -> None:
    code = (
        "import asyncio, logging\n"
        "from gateway.observability.logs import configure_logging, log_request, RequestLog\n"
        "configure_logging('info', 'json')\n"
        "async def main():\n"
        "    for i in range(3):\n"
        "        log_request(RequestLog(request_id=f'r{i}', route='/x', status=200,\n"
        "                               latency_ms=1))\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )
    ids = [json.loads(x)["request_id"] for x in out.stderr.splitlines() if x.startswith("{")]
    assert ids == ["r0", "r1", "r2"]


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept(captured: io.StringIO) -> Iterator[_Keep]:
    keep = _Keep()
    access = logging.getLogger("syntic.access")
    access.addHandler(keep)
    yield keep
    access.removeHandler(keep)


FORMATTER_FIELDS = {"message", "asctime"}  # set on a record by the formatters it met


@pytest.mark.parametrize("status", [200, 503])
def test_the_access_record_is_a_standard_record(kept: _Keep, status: int) -> None:
    before = time.time()
    for _ in range(2):
        log_request(RequestLog(request_id="r", route="/x", status=status, latency_ms=1))
    after = time.time()
    reference = logging.getLogger("syntic.access").makeRecord(
        "syntic.access", logging.INFO, "m", 0, "request", (), None
    )
    extras = {
        "request_id",
        "key_id",
        "model",
        "route",
        "status",
        "code",
        "schema_retries",
        "latency_ms",
        "streamed",
    }
    first, second = kept.records
    assert first is not second
    for record in kept.records:
        assert type(record) is logging.LogRecord
        assert record.levelno == (logging.WARNING if status >= 500 else logging.INFO)
        attrs = {k for k in vars(record) if k not in FORMATTER_FIELDS}
        assert attrs == set(vars(reference)) | extras
        assert record.funcName == "log_request" and record.getMessage() == "request"
        assert before <= record.created <= after


def test_a_custom_record_factory_is_used_for_the_access_line(kept: _Keep) -> None:
    default = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = default(*args, **kwargs)
        record.trace_id = "t-1"
        return record

    logging.setLogRecordFactory(factory)
    try:
        log_request(RequestLog(request_id="r", route="/x", status=200, latency_ms=1))
    finally:
        logging.setLogRecordFactory(default)
    (record,) = kept.records
    assert record.__dict__["trace_id"] == "t-1"


def _entry(model: str | None = "amara") -> RequestLog:
    return RequestLog(
        request_id="req_9",
        route="/v1/chat/completions",
        status=200,
        latency_ms=3.21,
        key_id="key_9",
        model=model,
        code=None,
        schema_retries=2,
        streamed=True,
    )


SERVED_SCRIPT = """
import io, logging, sys
from gateway.observability.logs import RequestLog, configure_logging, log_request
buf = io.StringIO()
handler = configure_logging("info", "json", stream=buf)
entry = RequestLog(request_id="req_9", route="/v1/chat/completions", status=200,
                   latency_ms=3.21, key_id="key_9", model=sys.argv[1], code=None,
                   schema_retries=2, streamed=True)
log_request(entry)
handler.flush()
sys.stdout.write(buf.getvalue())
"""


def _served_line(model: str) -> dict[str, object]:
    """The access line as a served process writes it (a subprocess: under pytest its own
    handlers sit on the root logger)."""
    out = subprocess.run(
        [sys.executable, "-c", SERVED_SCRIPT, model],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    (line,) = [json.loads(line) for line in out.splitlines() if line]
    return dict(line)


def test_the_served_access_line_has_every_field() -> None:
    line = _served_line("amara")
    assert line.pop("ts")
    assert line == {
        "level": "info",
        "logger": "syntic.access",
        "msg": "request",
        "request_id": "req_9",
        "key_id": "key_9",
        "model": "amara",
        "route": "/v1/chat/completions",
        "status": 200,
        "code": None,
        "schema_retries": 2,
        "latency_ms": 3.21,
        "streamed": True,
    }


def test_the_served_access_line_redacts_a_key_sent_as_the_model() -> None:
    assert _served_line(f"gpt {CANARY}")["model"] == "gpt sk_live_[REDACTED]"


def test_another_handler_gets_a_real_record(
    captured: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="syntic.access")
    log_request(_entry())
    assert [r.__dict__["request_id"] for r in caplog.records] == ["req_9"]
    assert _lines(captured)[0]["request_id"] == "req_9"  # and our handler still has it
