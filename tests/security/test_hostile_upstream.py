"""A real gateway against an upstream that misbehaves on purpose (``HostileUpstream``).

Each case asserts what the client sees (status and envelope, or the in-band error event of
a stream that had started), that the gateway's event loop kept answering (``/healthz``
polled throughout), that its peak memory stayed bounded, and that the next request is
served with its own answer (never a neighbour's, never a poisoned pooled connection).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.upstream.errors import MAX_MESSAGE_CHARS
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.hostile_upstream import HostileUpstream

MODES = (
    "ok",
    "spec-sse",
    "interim-100",
    "interim-103",
    "switch-101",
    "trickle",
    "endless-stream",
    "gzip-bomb",
    "gzip-bomb-stream",
    "endless-line",
    "invalid-utf8",
    "reset-body",
    "reset-stream",
    "error-bomb",
    "error-endless",
)
TIMEOUT_S = 2.0  # each model's timeout_s
REQUEST_TIMEOUT_S = 4.0  # the gateway's request deadline
MEMORY_BOUND = 150 * 1024 * 1024  # peak RSS growth for one hostile request


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        up.bomb()  # built before any case is timed
        up.bomb(_stream_bomb_prefix())
        up.bomb(b'{"error": {"message": "')  # error-bomb's
        yield up


def _stream_bomb_prefix() -> bytes:
    from tests.support.hostile_upstream import chunk

    return chunk({"role": "assistant", "content": "begin "}) + b"data: "


@pytest.fixture(scope="module")
def gw(
    hostile: HostileUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    models = [model_table(m, hostile.base_url(m), timeout_s=TIMEOUT_S) for m in MODES]
    g = start_gateway(
        tmp_path_factory.mktemp("hostile"), models, server={"request_timeout_s": REQUEST_TIMEOUT_S}
    )
    yield g
    g.stop()


def _rss(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


class Watch:
    """Polls ``/healthz`` while a case runs: the worst answer time is the loop's stall."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.gw = gw
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.gw.base_url, timeout=30) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                assert client.get("/healthz").status_code == 200
                self.worst = max(self.worst, time.monotonic() - started)
                self._stop.wait(0.02)

    def __enter__(self) -> Watch:
        self.rss_before = _rss(self.gw.proc.pid, "VmRSS")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.peak_growth = _rss(self.gw.proc.pid, "VmHWM") - self.rss_before


def _body(mode: str, text: str, stream: bool) -> dict[str, Any]:
    return {"model": mode, "messages": [{"role": "user", "content": text}], "stream": stream}


def _post(gw: GatewayProcess, mode: str, text: str, stream: bool = False) -> httpx.Response:
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=_body(mode, text, stream),
        headers={"authorization": f"Bearer {gw.api_key}"},
        timeout=60,
    )


def _events(resp: httpx.Response) -> list[dict[str, Any]]:
    out = []
    for line in resp.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(orjson.loads(line[6:]))
    return out


def _assert_own_answer(gw: GatewayProcess, mode: str = "ok") -> None:
    for stream in (False, True):
        text = secrets.token_hex(6)
        resp = _post(gw, mode, text, stream)
        assert resp.status_code == 200, resp.text
        if stream:
            content = "".join(
                c["choices"][0]["delta"].get("content") or ""
                for c in _events(resp)
                if c.get("choices")
            )
        else:
            content = resp.json()["choices"][0]["message"]["content"]
        assert content == f"echo: {text}"


@pytest.mark.parametrize("mode", ["interim-100", "interim-103"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_interim_answers_are_skipped(
    gw: GatewayProcess, hostile: HostileUpstream, mode: str, stream: bool
) -> None:
    """1xx answers before the real one: each request gets its own final answer, on a
    connection that stays in step (a second and third request reuse it)."""
    for _ in range(3):
        text = secrets.token_hex(6)
        resp = _post(gw, mode, text, stream)
        assert resp.status_code == 200, resp.text
        if stream:
            got = "".join(
                c["choices"][0]["delta"].get("content") or ""
                for c in _events(resp)
                if c.get("choices")
            )
        else:
            got = resp.json()["choices"][0]["message"]["content"]
        assert got == f"echo: {text}"


def test_a_stream_read_by_the_sse_rules(gw: GatewayProcess) -> None:
    """An event's data over several ``data:`` lines is one chunk (joined with LF, as the
    SSE rules and the openai SDK's decoder have it), with ``id:``, ``retry:`` and comments
    beside it: the client gets the whole text, streamed and not."""
    _assert_own_answer(gw, "spec-sse")


CASES = [
    # mode, streamed, status, code (a stream that started ends with an in-band error)
    ("switch-101", False, 502, "upstream_invalid_response"),
    ("switch-101", True, 502, "upstream_invalid_response"),
    ("trickle", False, 504, "upstream_timeout"),
    ("endless-stream", True, 200, "upstream_timeout"),
    ("gzip-bomb", False, 502, "upstream_output_too_large"),
    ("gzip-bomb-stream", True, 200, "upstream_output_too_large"),
    ("endless-line", True, 200, "upstream_output_too_large"),
    ("invalid-utf8", False, 502, "upstream_invalid_response"),
    ("invalid-utf8", True, 200, "upstream_invalid_response"),
    ("reset-body", False, 502, "upstream_error"),
    ("reset-stream", True, 200, "upstream_error"),
    # an error body is read to its cap (64 KiB), never further; quoted capped and scrubbed
    ("error-bomb", False, 400, "upstream_rejected"),
    ("error-bomb", True, 400, "upstream_rejected"),
    ("error-endless", False, 400, "upstream_rejected"),
    ("error-endless", True, 400, "upstream_rejected"),
]


@pytest.mark.parametrize(
    ("mode", "stream", "status", "code"),
    CASES,
    ids=[f"{c[0]}-{'sse' if c[1] else 'json'}" for c in CASES],
)
def test_misbehaviour(gw: GatewayProcess, mode: str, stream: bool, status: int, code: str) -> None:
    with Watch(gw) as watch:
        resp = _post(gw, mode, "hello", stream)
    assert resp.status_code == status, resp.text
    if status == 200:
        events = _events(resp)
        assert "error" in events[-1], events[-3:]
        error = events[-1]["error"]
        assert resp.text.rstrip().endswith("}") and "[DONE]" not in resp.text
    else:
        error = resp.json()["error"]
    assert error["code"] == code
    assert len(error["message"]) <= MAX_MESSAGE_CHARS + 1 and "sk-proj-" not in error["message"]
    assert "Traceback" not in resp.text
    print(
        f"{mode}: /healthz worst {watch.worst * 1000:.0f} ms, "
        f"peak RSS +{watch.peak_growth / 2**20:.0f} MiB"
    )
    # A loop blocked by the case would hold /healthz for the whole request deadline; how
    # long it is held otherwise is a figure (printed above), not a pass/fail line here.
    assert watch.worst < REQUEST_TIMEOUT_S, f"/healthz waited {watch.worst:.2f}s"
    assert watch.peak_growth < MEMORY_BOUND, f"peak RSS grew {watch.peak_growth >> 20} MiB"
    _assert_own_answer(gw)
    assert "Traceback" not in gw.log()


def test_sdk_sees_a_typed_error_for_a_malformed_answer(gw: GatewayProcess) -> None:
    client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(
            model="invalid-utf8", messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 502
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "upstream_invalid_response"
