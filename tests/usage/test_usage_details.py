"""Usage details end to end: every upstream wire (chat completions, Responses, Messages)
to every client dialect through the official SDKs, streamed and not. The cache and
reasoning counts the upstream reports reach the client in its dialect's own fields, and
the ledger row (read through the admin API) bills the same numbers; usage the gateway
had to estimate is marked ``estimated`` in both.

One upstream answer, three spellings of the same counts (40 prompt tokens of which 25
read from the cache and 5 written to it, 12 completion tokens of which 7 reasoning):

- chat completions: ``prompt_tokens`` 40, ``prompt_tokens_details.cached_tokens`` 25,
  ``completion_tokens_details.reasoning_tokens`` 7;
- Responses: ``input_tokens`` 40, ``input_tokens_details.cached_tokens`` 25,
  ``output_tokens_details.reasoning_tokens`` 7;
- Messages: ``input_tokens`` 10 (the uncached ones), ``cache_read_input_tokens`` 25,
  ``cache_creation_input_tokens`` 5, ``output_tokens_details.thinking_tokens`` 7.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream, Tokens
from tests.support.three_wires import start_three_wire_gateway

WIRES = {"chat": "oa", "responses": "rs", "messages": "an"}  # upstream wire -> model
DIALECTS = ("chat", "responses", "messages")
PROMPT = "Say hello."
TEXT = "Hello there, nice to meet you."
DETAILS = Tokens(cache_read=25, cache_write=5, reasoning=7)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"amount_pence": {"type": "integer"}},
    "required": ["amount_pence"],
    "additionalProperties": False,
}
GOOD, BAD = '{"amount_pence": 1250}', '{"amount_pence": "12.50"}'


@dataclass(frozen=True)
class Counts:
    """Usage in the gateway's one meaning: the prompt includes the cached tokens."""

    prompt: int
    completion: int
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    estimated: bool = False


@dataclass
class UsageGateway:
    gw: GatewayProcess
    admin_key: str

    def key(self) -> tuple[str, str]:
        """A fresh customer key (id, secret), so its ledger rows are this test's alone."""
        res = httpx.post(
            self.gw.base_url + "/admin/keys",
            json={"name": secrets.token_hex(4)},
            headers={"authorization": f"Bearer {self.admin_key}"},
            timeout=20,
        )
        assert res.status_code == 201, res.text
        created: dict[str, Any] = res.json()
        return str(created["key"]["id"]), str(created["secret"])

    def row(self, key_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """The key's one ledger row, once the ledger writer has flushed it."""
        deadline = time.monotonic() + timeout
        while True:
            res = httpx.get(
                self.gw.base_url + "/admin/requests",
                params={"key_id": key_id},
                headers={"authorization": f"Bearer {self.admin_key}"},
                timeout=20,
            )
            rows: list[dict[str, Any]] = res.json()["data"]
            if rows:
                assert len(rows) == 1, rows
                return rows[0]
            assert time.monotonic() < deadline, f"no ledger row for {key_id}"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def ugw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UsageGateway]:
    gw = start_three_wire_gateway(
        scripted_upstream_server, tmp_path_factory.mktemp("usage-details")
    )
    try:
        out = gw.syntic("keys", "create", "--name", "ops", "--admin")
        yield UsageGateway(gw, out.stdout.strip().splitlines()[-1].strip())
    finally:
        gw.stop()


# -- the clients -----------------------------------------------------------------------


def _dump(model: Any) -> dict[str, Any]:
    """An SDK object's fields as sent (extra fields such as ``schema_retries`` kept)."""
    dumped: dict[str, Any] = model.model_dump(exclude_none=True)
    return dumped


def _chat(
    gw: GatewayProcess, secret: str, model: str, stream: bool, tools: list[Any] | None
) -> dict[str, Any]:
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=secret, max_retries=0, timeout=20
    ) as client:
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        messages: Any = [{"role": "user", "content": PROMPT}]
        if not stream:
            completion = client.chat.completions.create(model=model, messages=messages, **extra)
            assert completion.usage is not None
            return _dump(completion.usage)
        chunks = list(
            client.chat.completions.create(
                model=model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
        )
        usage = chunks[-1].usage
        assert usage is not None and not chunks[-1].choices  # the final usage chunk
        return _dump(usage)


def _responses(
    gw: GatewayProcess, secret: str, model: str, stream: bool, tools: list[Any] | None
) -> dict[str, Any]:
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=secret, max_retries=0, timeout=20
    ) as client:
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        if not stream:
            response = client.responses.create(model=model, input=PROMPT, **extra)
        else:
            events = list(client.responses.create(model=model, input=PROMPT, stream=True, **extra))
            assert events[-1].type == "response.completed"
            response = events[-1].response
        assert response.usage is not None
        return _dump(response.usage)


def _messages(
    gw: GatewayProcess, secret: str, model: str, stream: bool, tools: list[Any] | None
) -> dict[str, Any]:
    with anthropic.Anthropic(
        base_url=gw.base_url, api_key=secret, max_retries=0, timeout=20
    ) as client:
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        messages: Any = [{"role": "user", "content": PROMPT}]
        if not stream:
            message = client.messages.create(model=model, max_tokens=64, messages=messages, **extra)
            return _dump(message.usage)
        with client.messages.stream(
            model=model, max_tokens=64, messages=messages, **extra
        ) as events:
            deltas = [e for e in events if e.type == "message_delta"]
            final = events.get_final_message()
        assert len(deltas) == 1
        sent = _dump(deltas[0].usage)
        # The SDK's accumulated message takes every count from message_delta.
        assert _dump(final.usage) == {
            k: v for k, v in sent.items() if k not in ("schema_retries", "estimated")
        }
        return sent


CLIENTS = {"chat": _chat, "responses": _responses, "messages": _messages}


def seen(dialect: str, usage: dict[str, Any]) -> Counts:
    """What a client of ``dialect`` was told, in the gateway's meaning."""
    estimated = usage.get("estimated", False)
    if dialect == "chat":
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        prompt_details = usage.get("prompt_tokens_details", {})
        return Counts(
            usage["prompt_tokens"],
            usage["completion_tokens"],
            prompt_details.get("cached_tokens", 0),
            prompt_details.get("cache_write_tokens", 0),
            usage.get("completion_tokens_details", {}).get("reasoning_tokens", 0),
            estimated,
        )
    if dialect == "responses":
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        return Counts(
            usage["input_tokens"],
            usage["output_tokens"],
            usage["input_tokens_details"]["cached_tokens"],
            usage["input_tokens_details"]["cache_write_tokens"],
            usage["output_tokens_details"]["reasoning_tokens"],
            estimated,
        )
    read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
    return Counts(
        usage["input_tokens"] + read + written,
        usage["output_tokens"],
        read,
        written,
        usage.get("output_tokens_details", {}).get("thinking_tokens", 0),
        estimated,
    )


def billed(row: dict[str, Any]) -> Counts:
    """What the ledger row bills, first attempt and corrections together."""
    return Counts(
        row["prompt_tokens"] + row["correction_prompt_tokens"],
        row["completion_tokens"] + row["correction_completion_tokens"],
        row["cache_read_tokens"],
        row["cache_creation_tokens"],
        row["reasoning_tokens"],
        row["estimated"],
    )


def expected_usage(dialect: str, c: Counts, retries: int = 0) -> dict[str, Any]:
    """The usage object of ``dialect`` for counts ``c``, field for field as its SDK types
    define it (plus the gateway's ``schema_retries``)."""
    if dialect == "chat":
        prompt_details = {"cached_tokens": c.cache_read}
        if c.cache_write:
            prompt_details["cache_write_tokens"] = c.cache_write
        return {
            "prompt_tokens": c.prompt,
            "completion_tokens": c.completion,
            "total_tokens": c.prompt + c.completion,
            "prompt_tokens_details": prompt_details,
            "completion_tokens_details": {"reasoning_tokens": c.reasoning},
            "schema_retries": retries,
        }
    if dialect == "responses":
        return {
            "input_tokens": c.prompt,
            "input_tokens_details": {
                "cached_tokens": c.cache_read,
                "cache_write_tokens": c.cache_write,
            },
            "output_tokens": c.completion,
            "output_tokens_details": {"reasoning_tokens": c.reasoning},
            "total_tokens": c.prompt + c.completion,
            "schema_retries": retries,
        }
    out: dict[str, Any] = {
        "input_tokens": c.prompt - c.cache_read - c.cache_write,
        "cache_creation_input_tokens": c.cache_write,
        "cache_read_input_tokens": c.cache_read,
        "output_tokens": c.completion,
    }
    if c.reasoning:
        out["output_tokens_details"] = {"thinking_tokens": c.reasoning}
    out["schema_retries"] = retries
    return out


# -- the tests -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("wire", sorted(WIRES))
def test_the_upstreams_usage_details_reach_the_client_and_the_ledger(
    ugw: UsageGateway, upstream: ScriptedUpstream, wire: str, dialect: str, stream: bool
) -> None:
    upstream.queue(Reply(content=TEXT, usage=(40, 12), details=DETAILS))
    key_id, secret = ugw.key()
    usage = CLIENTS[dialect](ugw.gw, secret, WIRES[wire], stream, None)
    counts = Counts(40, 12, cache_read=25, cache_write=5, reasoning=7)
    expected = expected_usage(dialect, counts)
    if (wire, dialect) == ("chat", "chat"):  # same wire: the upstream's other members too
        expected["prompt_tokens_details"]["audio_tokens"] = 0
        expected["completion_tokens_details"]["audio_tokens"] = 0
    assert usage == expected  # nothing estimated, nothing summed
    if dialect == "messages":
        assert usage["input_tokens"] == 10  # the uncached ones only, never the sum (40)
    assert billed(ugw.row(key_id)) == counts


_TOOLS: dict[str, list[Any]] = {
    "chat": [
        {"type": "function", "function": {"name": "refund", "strict": True, "parameters": SCHEMA}}
    ],
    "responses": [{"type": "function", "name": "refund", "strict": True, "parameters": SCHEMA}],
    "messages": [{"name": "refund", "strict": True, "input_schema": SCHEMA}],
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("dialect", "wire"), [("chat", "messages"), ("responses", "chat"), ("messages", "responses")]
)
def test_a_corrected_request_bills_both_calls_as_the_client_sees_them(
    ugw: UsageGateway, upstream: ScriptedUpstream, dialect: str, wire: str, stream: bool
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("refund", BAD)], usage=(40, 12), details=DETAILS),
        Reply(
            tool_calls=[Call("refund", GOOD)],
            usage=(60, 9),
            details=Tokens(cache_read=30, cache_write=0, reasoning=4),
        ),
    )
    key_id, secret = ugw.key()
    usage = CLIENTS[dialect](ugw.gw, secret, WIRES[wire], stream, _TOOLS[dialect])
    total = Counts(100, 21, cache_read=55, cache_write=5, reasoning=11)
    assert usage == expected_usage(dialect, total, retries=1)
    row = ugw.row(key_id)
    assert billed(row) == seen(dialect, usage) == total
    assert (row["prompt_tokens"], row["completion_tokens"]) == (40, 12)  # first attempt
    assert (row["correction_prompt_tokens"], row["correction_completion_tokens"]) == (60, 9)
    assert (row["schema_retries"], row["upstream_calls"]) == (1, 2)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("wire", sorted(WIRES))
def test_usage_the_upstream_never_sent_is_estimated_and_says_so(
    ugw: UsageGateway, upstream: ScriptedUpstream, wire: str, dialect: str, stream: bool
) -> None:
    upstream.queue(Reply(content=TEXT, usage=(40, 12), report_usage=False))
    key_id, secret = ugw.key()
    usage = CLIENTS[dialect](ugw.gw, secret, WIRES[wire], stream, None)
    assert usage["estimated"] is True
    told = seen(dialect, usage)
    assert told.prompt > 0 and told.completion == (len(TEXT) + 3) // 4  # a token per 4 chars
    assert (told.cache_read, told.cache_write, told.reasoning) == (0, 0, 0)
    row = ugw.row(key_id)
    assert row["estimated"] is True and row["status"] == 200
    assert billed(row) == told


@pytest.mark.parametrize("dialect", DIALECTS)
def test_usage_the_upstream_sent_is_not_marked_estimated(
    ugw: UsageGateway, upstream: ScriptedUpstream, dialect: str
) -> None:
    upstream.queue(Reply(content=TEXT, usage=(40, 12)))
    key_id, secret = ugw.key()
    usage = CLIENTS[dialect](ugw.gw, secret, "oa", True, None)
    assert "estimated" not in usage
    assert billed(ugw.row(key_id)) == seen(dialect, usage) == Counts(40, 12)
