"""The agents' tests share one scripted upstream (speaking chat completions, Responses and
Messages) and one gateway in front of it, with three models per wire: ``syn-<wire>`` as the
agent asks, ``syn-<wire>-strict`` with ``strictify = true`` (the agents never mark a
tool strict, nor send ``x-syntic-strictify``), and ``syn-<wire>-tool-error``, strictified
with ``on_invalid = "tool_error"``.

An agent that is not installed skips its tests, saying why; under ``SYNTIC_REQUIRE_AGENTS=1``
(CI) an agent marked ``ci = yes`` in ``scripts/agents.txt`` fails instead, and so does a
missing ``strace``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.agents.installed import Pin, pins, required
from tests.agents.runner import Finished, Scratch, run_agent
from tests.agents.table import Agent
from tests.agents.wires import Wire
from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.responses_wire import ResponsesRenderer
from tests.support.scripted_upstream import (
    OPENAI_RENDERERS,
    HttpError,
    RecordedRequest,
    ScriptedUpstream,
    Step,
)

WIRES: tuple[Wire, ...] = ("chat", "responses", "messages")
Turn = Step | Callable[[RecordedRequest], Step]


def model_name(wire: Wire, *, strict: bool, on_invalid: str = "error") -> str:
    if on_invalid == "tool_error":
        return f"syn-{wire}-tool-error"
    return f"syn-{wire}-strict" if strict else f"syn-{wire}"


def _models(base_url: str) -> list[dict[str, Any]]:
    wire_keys: dict[Wire, dict[str, Any]] = {
        "chat": {},
        "responses": {"api": "responses"},
        "messages": {"provider": "anthropic"},
    }
    tables = [
        model_table(model_name(w, strict=s), base_url, strictify=s, **wire_keys[w])
        for w in WIRES
        for s in (False, True)
    ]
    tables += [
        model_table(
            model_name(w, strict=True, on_invalid="tool_error"),
            base_url,
            strictify=True,
            on_invalid="tool_error",
            **wire_keys[w],
        )
        for w in WIRES
    ]
    return tables


@pytest.fixture(scope="session")
def agent_upstream() -> Iterator[ScriptedUpstream]:
    renderers = {
        **OPENAI_RENDERERS,
        "/responses": ResponsesRenderer(),
        "/messages": AnthropicRenderer(),
    }
    with ScriptedUpstream(renderers=renderers) as server:
        yield server


@pytest.fixture(scope="session")
def agent_gateway(
    agent_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_gateway(tmp_path_factory.mktemp("agents-gw"), _models(agent_upstream.base_url))
    yield gw
    gw.stop()


@pytest.fixture(scope="session")
def strace() -> str:
    found = shutil.which("strace")
    if found is None:
        if os.environ.get("SYNTIC_REQUIRE_AGENTS") == "1":
            pytest.fail("SYNTIC_REQUIRE_AGENTS=1 but strace is not installed")
        pytest.skip("strace is not installed (the agents run under it to see their traffic)")
    return found


class Turns:
    """The scripted upstream's answers in order, one per request: a step, or a function of
    the request (to answer from the tools the agent sent). Past the last, a 500."""

    def __init__(self, *turns: Turn) -> None:
        self._turns = list(turns)

    def __call__(self, request: RecordedRequest) -> Step:
        if not self._turns:
            return HttpError(
                500,
                body={
                    "error": {"message": "scripted upstream: no more turns", "type": "server_error"}
                },
            )
        turn = self._turns.pop(0)
        return turn(request) if callable(turn) else turn


@dataclass
class AgentRun:
    """What one run left behind: the agent's exit and output, what the upstream received."""

    agent: Agent
    scratch: Scratch
    finished: Finished
    requests: list[RecordedRequest]
    gateway_log: str

    def explain(self) -> str:
        paths = [f"{r.method} {r.path}" for r in self.requests]
        return (
            f"{self.agent.name}: {self.finished.tail()}\nupstream requests: {paths}\n"
            f"gateway log (tail):\n{self.gateway_log[-3000:]}"
        )


Script = Callable[[Scratch], tuple[Turn, ...]]  # the scratch repository -> the turns


class Runner(Protocol):
    def __call__(
        self, agent: Agent, strict: bool, script: Script, *, on_invalid: str = "error"
    ) -> AgentRun: ...


@pytest.fixture
def run(
    agent_upstream: ScriptedUpstream,
    agent_gateway: GatewayProcess,
    strace: str,
    tmp_path: Path,
) -> Iterator[Runner]:
    """``run(agent, strict, script)``: the agent's doc setup and command against the
    gateway's model for its wire (``on_invalid="tool_error"``: its tool-error model), the
    upstream answering ``script(scratch)``."""

    def go(agent: Agent, strict: bool, script: Script, *, on_invalid: str = "error") -> AgentRun:
        pin = _installed(pins()[agent.name])
        scratch = Scratch.make(tmp_path / agent.name)
        log_from = len(agent_gateway.log())
        agent_upstream.reset()
        agent_upstream.responder = Turns(*script(scratch))
        finished = run_agent(
            pin,
            pin.binary(os.environ),
            scratch,
            agent_gateway.base_url,
            model_name(agent.wire, strict=strict, on_invalid=on_invalid),
            agent_gateway.api_key,
            strace,
        )
        return AgentRun(
            agent, scratch, finished, list(agent_upstream.requests), agent_gateway.log()[log_from:]
        )

    yield go
    agent_upstream.reset()


def _installed(pin: Pin) -> Pin:
    reason = pin.missing(os.environ)
    if reason is not None:
        if required(pin):  # CI must not skip these
            pytest.fail(f"SYNTIC_REQUIRE_AGENTS=1 but {reason}")
        pytest.skip(reason)
    return pin
