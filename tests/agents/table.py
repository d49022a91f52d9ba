"""The agents under test, one row each: the wire each speaks, the tool it reads a file
with (as its own request names it), that call's arguments, an invalid version of them, and
why the gateway refuses the agent today (its tests then are expected to fail, strictly)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agents.wires import Wire

Arguments = Callable[[Path], dict[str, Any]]  # the scratch repository -> the call's arguments


@dataclass(frozen=True, slots=True)
class Agent:
    name: str  # as in scripts/agents.txt and docs/agents.md
    wire: Wire
    tool: str
    reads: Arguments
    invalid: Arguments  # a mistake a model makes; the tool's schema refuses it
    refused: str | None = None

    def __str__(self) -> str:
        return self.name


AGENTS = (
    Agent(
        "codex",
        "responses",
        "exec_command",
        reads=lambda repo: {"cmd": "cat notes.txt"},
        invalid=lambda repo: {"cmd": ["bash", "-lc", "cat notes.txt"]},
    ),
    Agent(
        "claude",
        "messages",
        "Read",
        reads=lambda repo: {"file_path": str(repo / "notes.txt")},
        invalid=lambda repo: {"file_path": str(repo / "notes.txt"), "limit": "all"},
    ),
    Agent(
        "opencode",
        "chat",
        "read",
        reads=lambda repo: {"filePath": str(repo / "notes.txt")},
        invalid=lambda repo: {"filePath": str(repo / "notes.txt"), "offset": "1"},
    ),
    Agent(
        "llm",
        "chat",
        "read_file",
        reads=lambda repo: {"path": "notes.txt"},
        invalid=lambda repo: {"path": ["notes.txt"]},
    ),
)
