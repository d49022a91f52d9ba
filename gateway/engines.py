"""Engine profiles: what each OpenAI-compatible inference server accepts, as data.

A ``provider = "openai"`` model names its server with ``engine``; the profile says how
that server is asked for constrained output, which ``tool_choice`` values it reads, how an
assistant turn with tool calls must be encoded, whether it reports usage in streams and
how its own tokenizer is reached. The codec (``gateway.upstream.openai_codec``), the
same-wire body builder and the adapter read it; ``gateway.settings`` refuses a
combination a profile does not list. Each row was taken from the engine's own request
model at the version ``docs/upstream.md`` names.

Example::

    profile = PROFILES["llama_cpp_python"]
    profile.constrained_field  # "llama_cpp_python": {"type": "json_object", "schema": ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["PROFILES", "ConstrainedField", "Engine", "EngineProfile", "PlainOutput", "Tokenize"]

# The servers a profile exists for.
Engine = Literal["openai", "vllm", "sglang", "llama_cpp_server", "llama_cpp_python", "ollama"]
# The request shapes that ask for output under a JSON schema (``constrained_output``):
# vLLM's ``structured_outputs.json``, llama-server's top-level ``json_schema``, the OpenAI
# ``response_format`` json_schema (``openai`` and ``sglang`` send the same bytes), and
# llama-cpp-python's ``response_format: {"type": "json_object", "schema": ...}``.
ConstrainedField = Literal["vllm", "llama_cpp", "sglang", "openai", "llama_cpp_python"]
# What a schema'd output becomes when the gateway enforces (``constrained = false``): the
# OpenAI json_schema form, or a plain JSON-object request for an engine that refuses it.
PlainOutput = Literal["json_schema", "json_object"]


@dataclass(frozen=True, slots=True)
class Tokenize:
    """An engine's tokenize endpoint: ``POST {root}{path}`` with the text in ``field``,
    answered with ``{"tokens": [...]}`` (``root``: ``base_url`` without its ``/v1``)."""

    path: str
    field: str


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """One engine's row; each default is what the OpenAI API itself does."""

    name: Engine
    # How constrained output is asked for, and every override the engine reads.
    constrained_field: ConstrainedField
    accepted_fields: frozenset[ConstrainedField]
    plain_output: PlainOutput = "json_schema"
    # A tool's ``strict: true`` makes the engine decode that call's arguments under its schema.
    strict_tools: bool = False
    # A forced call (named ``tool_choice``) is decoded under the tool's schema.
    forced_call_constrained: bool = False
    # ``tool_choice`` is read at all, and in its named form (else: only the named tool is
    # sent, with "required" where the field is read).
    tool_choice: bool = True
    named_tool_choice: bool = True
    # "required" is read as "auto" (only a named choice constrains): with one tool, the
    # same request is that tool named.
    required_as_named: bool = False
    # An assistant turn with tool calls may say ``content: null`` (else ``""``).
    null_content_with_calls: bool = True
    # ``stream_options.include_usage`` is honoured (else nothing asks for it).
    stream_usage: bool = True
    # ``max_completion_tokens`` is read (else the limit goes as ``max_tokens``).
    max_completion_tokens: bool = True
    # Where usage the engine did not report is counted with its own tokenizer.
    tokenize: Tokenize | None = None


_OPENAI_SHAPE: frozenset[ConstrainedField] = frozenset({"openai", "sglang"})

PROFILES: Mapping[Engine, EngineProfile] = {
    "openai": EngineProfile("openai", "openai", _OPENAI_SHAPE, strict_tools=True),
    "vllm": EngineProfile(
        "vllm",
        "vllm",
        _OPENAI_SHAPE | {"vllm"},
        forced_call_constrained=True,
    ),
    "sglang": EngineProfile("sglang", "sglang", _OPENAI_SHAPE, forced_call_constrained=True),
    "llama_cpp_server": EngineProfile(
        "llama_cpp_server",
        "llama_cpp",
        _OPENAI_SHAPE | {"llama_cpp", "llama_cpp_python"},
        forced_call_constrained=True,
        named_tool_choice=False,
        tokenize=Tokenize("/tokenize", "content"),
    ),
    "llama_cpp_python": EngineProfile(
        "llama_cpp_python",
        "llama_cpp_python",
        frozenset({"llama_cpp_python"}),
        plain_output="json_object",
        forced_call_constrained=True,
        required_as_named=True,
        null_content_with_calls=False,
        stream_usage=False,
        max_completion_tokens=False,
        tokenize=Tokenize("/extras/tokenize", "input"),
    ),
    "ollama": EngineProfile(
        "ollama",
        "openai",
        _OPENAI_SHAPE,
        tool_choice=False,
        named_tool_choice=False,
        max_completion_tokens=False,
    ),
}
