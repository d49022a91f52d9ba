"""Structured logs: redaction everywhere, one JSON line per request."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from gateway.logs import RequestLog, configure_logging, log_format_from_env, log_request, redact

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
def test_no_record_shape_leaks_the_key(
    captured: io.StringIO, emit: object
) -> None:
    emit(logging.getLogger("some.library"))  # type: ignore[operator]
    out = captured.getvalue()
    assert out, "nothing was logged"
    assert CANARY not in out
    assert "CanaryZ9q8" not in out
    assert "[REDACTED]" in out


def test_request_line_shape(captured: io.StringIO) -> None:
    log_request(
        RequestLog(
            request_id="req_1", route="/v1/chat/completions", status=422, latency_ms=12.34567,
            key_id="key_1", model="amara", code="tool_arguments_invalid", schema_retries=1,
            streamed=False,
        )
    )
    (line,) = _lines(captured)
    assert line["msg"] == "request"
    assert line["logger"] == "syntic.access"
    assert line["level"] == "info"
    assert {k: line[k] for k in (
        "request_id", "key_id", "model", "route", "status", "code", "schema_retries",
        "latency_ms", "streamed",
    )} == {
        "request_id": "req_1", "key_id": "key_1", "model": "amara",
        "route": "/v1/chat/completions", "status": 422, "code": "tool_arguments_invalid",
        "schema_retries": 1, "latency_ms": 12.346, "streamed": False,
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
    log_request(RequestLog(request_id="r", route="/v1/messages", status=404, latency_ms=1,
                           model=f"oops {CANARY}", code="model_not_found"))
    (line,) = _lines(captured)
    assert line["model"] == "oops sk_live_[REDACTED]"
    assert CANARY not in captured.getvalue()
