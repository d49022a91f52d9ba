"""One field policy for every request field of every dialect, per kind of upstream.

Each ``Rule`` gives a field of a client dialect (``chat``: ``/v1/chat/completions``,
``responses``: ``/v1/responses``, ``messages``: ``/v1/messages``) one outcome for each
kind of upstream (``TARGETS``: the three wires and the local model):

- ``honoured``: the gateway reads it and acts on it; every upstream gets it in its own
  spelling (messages, tools, limits, ``n``, ``stream``);
- ``forwarded``: the upstream gets it as the client sent it (on the client's own wire,
  the body is the client's: ``gateway.upstream.same_wire``);
- ``translated``: the upstream gets that wire's equivalent field (``to``);
- ``dropped``: not sent, and named in the ``x-syntic-dropped`` response header: what
  cannot change the answer's contract (cache hints, safety identifiers, client metadata,
  verbosity, ...);
- ``refused``: 400 ``unsupported_parameter`` naming it, where dropping it would change
  the contract (audio output, background mode, hosted tools the gateway cannot run).

A field the table does not know is forwarded on the client's own wire (the vendor judges
it) and dropped with notice elsewhere. Decoders record what they see in ``Notes``
(``gateway.dialects.notes``); its ``screens()`` is the verdict per target
(``gateway.canonical.Screen``) that the service applies once the model, and so the
upstream, is known. ``docs/compatibility.md`` shows the table between its
``field-policy`` markers (``render_markdown``; a test keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gateway.canonical import Target, Wire

__all__ = [
    "HEADER_FIELDS",
    "MAX_NOTES",
    "RULES",
    "RULES_BY_KEY",
    "TARGETS",
    "WIRE_NAMES",
    "Outcome",
    "Rule",
    "render_markdown",
    "rule",
]

Outcome = Literal["honoured", "forwarded", "translated", "dropped", "refused"]
TARGETS: tuple[Target, ...] = ("chat", "responses", "messages", "local")
_LETTERS: Mapping[str, Outcome] = {
    "H": "honoured",
    "F": "forwarded",
    "T": "translated",
    "D": "dropped",
    "R": "refused",
}
WIRE_NAMES: Mapping[str, str] = {
    "chat": "chat completions",
    "responses": "Responses",
    "messages": "Anthropic Messages",
    "local": "the local model",
}
# Past this many unknown fields, one notice stands for the rest (a client's typo list is
# bounded anyway by the body cap; the header by name_list).
MAX_NOTES = 64


@dataclass(frozen=True, slots=True)
class Rule:
    """One field of one dialect. ``outcomes`` follows ``TARGETS``. ``to``: the field it
    becomes on a target where it is translated (or forwarded by the gateway's own codec);
    ``carry``: a cross-wire codec adds it from ``Screen.carried`` (False: the canonical
    request carries it). ``neutral``: values that ask for the default, so there is
    nothing to drop or refuse. ``convert``: the value on a translated target (``None``:
    no equivalent, dropped)."""

    dialect: Wire
    field: str
    outcomes: tuple[Outcome, Outcome, Outcome, Outcome]
    note: str = ""
    to: tuple[tuple[Target, str], ...] = ()
    carry: bool = False
    neutral: tuple[Any, ...] = ()
    convert: Callable[[Target, Any], Any] | None = None

    def outcome(self, target: Target) -> Outcome:
        return self.outcomes[TARGETS.index(target)]

    def target_field(self, target: Target) -> str:
        for name, path in self.to:
            if name == target:
                return path
        return self.field

    @property
    def notice(self) -> str:
        """The name ``x-syntic-dropped`` gives it: the field, or for a kind of entry
        (``input[] (reasoning)``) the path and the kind (``input[].reasoning``)."""
        base, _, kinds = self.field.partition(" (")
        if not kinds:
            return self.field
        return f"{base}.{kinds.rstrip(')').split(',')[0].split()[-1]}"

    @property
    def always(self) -> Outcome | None:
        """The outcome when it is the same for every target."""
        first = self.outcomes[0]
        return first if all(o == first for o in self.outcomes) else None


# -- value conversions -----------------------------------------------------------------

# OpenAI's reasoning efforts -> Anthropic's output_config.effort ("none" has no equivalent:
# every Anthropic effort thinks). Anthropic's efforts are all OpenAI efforts too.
_TO_ANTHROPIC_EFFORT = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
_OPENAI_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})


def _effort(target: Target, value: Any) -> Any:
    if not isinstance(value, str):
        return None
    if target == "messages":
        return _TO_ANTHROPIC_EFFORT.get(value)
    return value if value in _OPENAI_EFFORTS else None


def _same(_target: Target, value: Any) -> Any:
    return value


# -- the table -------------------------------------------------------------------------


def _r(
    dialect: Wire,
    field: str,
    letters: str,
    note: str = "",
    *,
    to: Mapping[Target, str] | None = None,
    carry: bool = False,
    neutral: tuple[Any, ...] = (),
    convert: Callable[[Target, Any], Any] | None = None,
) -> Rule:
    chat, responses, messages, local = (_LETTERS[c] for c in letters.split())
    return Rule(
        dialect,
        field,
        (chat, responses, messages, local),
        note,
        tuple((to or {}).items()),
        carry,
        neutral,
        convert,
    )


_CACHE = "a prompt-cache hint: the answer is the same without it"
_HOSTED = "a hosted tool the gateway cannot run for another provider"
_SAMPLING = "a sampling option that wire does not take"

# Order within a dialect: as the docs show it (the SDK's own fields first, nested after).
RULES: tuple[Rule, ...] = (
    # ---- /v1/chat/completions ---------------------------------------------------------
    _r("chat", "model", "H H H H", "the catalogue name; the upstream gets `upstream_model`"),
    _r("chat", "messages", "H H H H", "system and developer messages become the system prompt"),
    _r("chat", "stream", "H H H H", "strict calls held back until they validate"),
    _r("chat", "stream_options", "H H H H", "`include_usage` answered by the gateway's stream"),
    _r("chat", "n", "H H H H", "one upstream call per choice (at most 16), each enforced"),
    _r("chat", "tools", "H H H H", "strict function tools enforced"),
    _r("chat", "tool_choice", "H H H H"),
    _r("chat", "parallel_tool_calls", "H H H H", "Messages: `disable_parallel_tool_use`"),
    _r("chat", "response_format", "H H H H", "a strict `json_schema` is enforced"),
    _r("chat", "temperature", "H H H H"),
    _r("chat", "top_p", "H H H H"),
    _r(
        "chat",
        "stop",
        "H R H H",
        "the Responses API has no stop sequences",
        to={"messages": "stop_sequences"},
    ),
    _r(
        "chat",
        "max_completion_tokens",
        "F T T H",
        to={"responses": "max_output_tokens", "messages": "max_tokens"},
    ),
    _r(
        "chat",
        "max_tokens",
        "F T T H",
        "deprecated by OpenAI for `max_completion_tokens`",
        to={"responses": "max_output_tokens", "messages": "max_tokens"},
    ),
    _r("chat", "user", "F F T D", to={"messages": "metadata.user_id"}),
    _r("chat", "metadata", "F F D D", carry=True),
    _r(
        "chat",
        "reasoning_effort",
        "F T T D",
        "`none` has no Messages equivalent (dropped)",
        to={"responses": "reasoning.effort", "messages": "output_config.effort"},
        carry=True,
        convert=_effort,
    ),
    _r(
        "chat",
        "verbosity",
        "F T D D",
        to={"responses": "text.verbosity"},
        carry=True,
        neutral=("medium",),
        convert=_same,
    ),
    _r("chat", "service_tier", "F F D D", carry=True, neutral=("auto",)),
    _r("chat", "prompt_cache_key", "F F D D", _CACHE, carry=True),
    _r("chat", "prompt_cache_retention", "F F D D", _CACHE, carry=True),
    _r("chat", "prompt_cache_options", "F F D D", _CACHE, carry=True),
    _r("chat", "safety_identifier", "F F D D", carry=True),
    _r("chat", "moderation", "F F R R", "moderation the gateway cannot run itself", carry=True),
    _r("chat", "seed", "F D D D", _SAMPLING),
    _r("chat", "frequency_penalty", "F D D D", _SAMPLING, neutral=(0, 0.0)),
    _r("chat", "presence_penalty", "F D D D", _SAMPLING, neutral=(0, 0.0)),
    _r("chat", "logit_bias", "F D D D", _SAMPLING, neutral=({},)),
    _r(
        "chat",
        "logprobs",
        "F D D D",
        "the gateway's answer carries no log probabilities",
        neutral=(False,),
    ),
    _r("chat", "top_logprobs", "F D D D", "as `logprobs`", neutral=(0,)),
    _r("chat", "store", "F D D D", "OpenAI's stored completions", neutral=(False,)),
    _r("chat", "prediction", "F D D D", "a latency hint"),
    _r(
        "chat",
        "modalities",
        "F D D D",
        "text is the default; audio output is `audio`",
        neutral=(["text"],),
    ),
    _r("chat", "audio", "R R R R", "audio output: the gateway answers with text"),
    _r("chat", "web_search_options", "F R R R", _HOSTED),
    _r("chat", "functions", "R R R R", "the legacy function-calling API: send `tools`"),
    _r("chat", "function_call", "R R R R", "the legacy function-calling API: send `tool_choice`"),
    _r(
        "chat",
        "messages[].content[].image_url.detail",
        "F T D D",
        to={"responses": "input[].content[].detail"},
        neutral=("auto",),
    ),
    _r("chat", "messages[].name", "F D D D", "a participant name"),
    _r(
        "chat",
        "messages[].content[] (input_audio, file)",
        "F R R R",
        "input that wire cannot carry: dropping it would change the answer",
    ),
    _r("chat", "tools[] (custom)", "F R R R", "a free-form tool the gateway cannot enforce"),
    _r("chat", "tool_choice (custom, allowed_tools)", "F R R R"),
    _r("chat", "openai-beta", "F D D D", ""),
    # ---- /v1/responses ----------------------------------------------------------------
    _r("responses", "model", "H H H H", "the catalogue name; the upstream gets `upstream_model`"),
    _r("responses", "input", "H H H H"),
    _r("responses", "instructions", "H H H H", "the system prompt"),
    _r("responses", "stream", "H H H H", "strict calls held back until they validate"),
    _r("responses", "stream_options", "H H H H", "the gateway's own stream"),
    _r("responses", "tools", "H H H H", "function tools are strict unless `strict: false`"),
    _r("responses", "tool_choice", "H H H H"),
    _r("responses", "parallel_tool_calls", "H H H H"),
    _r("responses", "text", "H H H H", "`text.format`: a strict `json_schema` is enforced"),
    _r("responses", "temperature", "H H H H"),
    _r("responses", "top_p", "H H H H"),
    _r("responses", "metadata", "H H H H", "echoed and stored with the response"),
    _r("responses", "store", "H H H H", "the gateway stores; the upstream gets `store: false`"),
    _r(
        "responses",
        "previous_response_id",
        "H H H H",
        "the gateway's own stored history, sent as input",
    ),
    _r(
        "responses",
        "max_output_tokens",
        "T F T H",
        to={"chat": "max_completion_tokens", "messages": "max_tokens"},
    ),
    _r("responses", "user", "F F T D", to={"messages": "metadata.user_id"}),
    _r("responses", "reasoning", "H H H H", "its fields below"),
    _r(
        "responses",
        "text.verbosity",
        "T F D D",
        to={"chat": "verbosity"},
        carry=True,
        neutral=("medium",),
        convert=_same,
    ),
    _r(
        "responses",
        "reasoning.effort",
        "T F T D",
        "`none` has no Messages equivalent (dropped)",
        to={"chat": "reasoning_effort", "messages": "output_config.effort"},
        carry=True,
        convert=_effort,
    ),
    _r(
        "responses",
        "reasoning.summary",
        "D F D D",
        "a summary of reasoning the gateway's answer does not carry",
    ),
    _r("responses", "reasoning.generate_summary", "D F D D", "as `reasoning.summary`"),
    _r(
        "responses",
        "include",
        "D F D D",
        "extra output the gateway's answer does not carry",
        neutral=([],),
    ),
    _r("responses", "service_tier", "F F D D", carry=True, neutral=("auto",)),
    _r("responses", "prompt_cache_key", "F F D D", _CACHE, carry=True),
    _r("responses", "prompt_cache_retention", "F F D D", _CACHE, carry=True),
    _r("responses", "prompt_cache_options", "F F D D", _CACHE, carry=True),
    _r("responses", "safety_identifier", "F F D D", carry=True),
    _r(
        "responses", "moderation", "F F R R", "moderation the gateway cannot run itself", carry=True
    ),
    _r(
        "responses",
        "truncation",
        "D F D D",
        "other wires fail a prompt that does not fit",
        neutral=("disabled",),
    ),
    _r(
        "responses",
        "top_logprobs",
        "D F D D",
        "the gateway's answer carries no log probabilities",
        neutral=(0,),
    ),
    _r("responses", "max_tool_calls", "D F D D", "bounds hosted tool calls"),
    _r("responses", "context_management", "D F D D", "server-side compaction"),
    _r("responses", "image", "D F D D", "image generation options"),
    _r("responses", "access_programs", "D F D D"),
    _r("responses", "client_metadata", "D F D D", "client bookkeeping (Codex)"),
    _r(
        "responses", "background", "R R R R", "the gateway answers in the request", neutral=(False,)
    ),
    _r("responses", "background_options", "R R R R", "as `background`"),
    _r(
        "responses",
        "conversation",
        "R R R R",
        "conversation state stays with the gateway: `previous_response_id`",
    ),
    _r(
        "responses",
        "prompt",
        "R R R R",
        "a stored prompt template: its tools and schemas are not the gateway's to enforce",
    ),
    _r(
        "responses",
        "tools[] (namespace)",
        "T F T T",
        "its function tools, flattened",
        to={"chat": "tools", "messages": "tools"},
    ),
    _r(
        "responses",
        "tools[] (hosted and custom tools)",
        "R F R R",
        f"{_HOSTED}: web_search, file_search, code_interpreter, mcp, shell, custom, ...",
    ),
    _r("responses", "tools[].defer_loading", "D F D D", "every tool is loaded"),
    _r("responses", "tools[].allowed_callers", "D F D D"),
    _r("responses", "tools[].output_schema", "D F D D"),
    _r("responses", "tool_choice (hosted, allowed_tools)", "R F R R", _HOSTED),
    _r("responses", "input[] (reasoning)", "D F D D", "another provider's reasoning"),
    _r(
        "responses",
        "input[] (other item types)",
        "R F R R",
        "items of hosted tools and custom calls",
    ),
    _r(
        "responses",
        "input[].content[].detail",
        "T F D D",
        to={"chat": "messages[].content[].image_url.detail"},
        neutral=("auto",),
    ),
    _r(
        "responses",
        "input[].content[] (input_file, file_id)",
        "R F R R",
        "input that wire cannot carry: dropping it would change the answer",
    ),
    _r("responses", "openai-beta", "D F D D", ""),
    # ---- /v1/messages -----------------------------------------------------------------
    _r("messages", "model", "H H H H", "the catalogue name; the upstream gets `upstream_model`"),
    _r("messages", "messages", "H H H H"),
    _r("messages", "system", "H H H H", "text blocks; kept as blocks on the same wire"),
    _r("messages", "stream", "H H H H", "strict calls held back until they validate"),
    _r("messages", "tools", "H H H H", "strict custom tools enforced"),
    _r("messages", "tool_choice", "H H H H"),
    _r("messages", "temperature", "H H H H"),
    _r("messages", "top_p", "H H H H"),
    _r(
        "messages",
        "max_tokens",
        "T T F H",
        to={"chat": "max_completion_tokens", "responses": "max_output_tokens"},
    ),
    _r(
        "messages",
        "stop_sequences",
        "T R F H",
        "the Responses API has no stop sequences",
        to={"chat": "stop"},
    ),
    _r(
        "messages",
        "metadata",
        "T T F D",
        "`user_id` is the user",
        to={"chat": "user", "responses": "user"},
        neutral=({},),
    ),
    _r("messages", "output_config", "H H H H", "`format`: enforced (strict)"),
    _r("messages", "output_format", "H H H H", "the earlier name of `output_config.format`"),
    _r(
        "messages",
        "output_config.effort",
        "T T F D",
        to={"chat": "reasoning_effort", "responses": "reasoning.effort"},
        carry=True,
        convert=_effort,
    ),
    _r(
        "messages",
        "thinking",
        "D D F D",
        "a thinking budget has no OpenAI equivalent (`output_config.effort` has)",
    ),
    _r(
        "messages",
        "cache_control",
        "D D F D",
        f"{_CACHE}; on the request, its blocks and its tools",
    ),
    _r("messages", "top_k", "D D F D", _SAMPLING),
    _r("messages", "container", "D D F D", "a code-execution container"),
    _r("messages", "context_management", "D D F D", "server-side context editing"),
    _r("messages", "diagnostics", "D D F D"),
    _r("messages", "inference_geo", "D D F D"),
    _r("messages", "service_tier", "D D F D", neutral=("auto",)),
    _r("messages", "speed", "D D F D", neutral=("standard",)),
    _r("messages", "user_profile_id", "D D F D"),
    _r("messages", "workspace_id", "D D F D"),
    _r("messages", "mcp_servers", "R R F R", _HOSTED),
    _r(
        "messages",
        "messages[] (role system)",
        "T T F T",
        "folded into the system prompt",
        to={"chat": "messages[0] (system)", "responses": "input[0] (system)"},
    ),
    _r(
        "messages",
        "messages[].content[] (thinking, redacted_thinking)",
        "D D F D",
        "replayed reasoning another provider cannot take",
    ),
    _r(
        "messages",
        "messages[].content[].content[] (tool_reference)",
        "D D F D",
        "a tool-search reference: every tool is loaded",
    ),
    _r(
        "messages",
        "messages[].content[] (other block types)",
        "R R F R",
        "documents, search results, server-tool blocks: dropping them would change the answer",
    ),
    _r("messages", "tools[] (server and Anthropic-defined tools)", "R R F R", _HOSTED),
    _r("messages", "tools[].defer_loading", "D D F D", "every tool is loaded"),
    _r("messages", "tools[].input_examples", "D D F D"),
    _r("messages", "tools[].eager_input_streaming", "D D F D"),
    _r("messages", "tools[].allowed_callers", "D D F D"),
    _r("messages", "anthropic-beta", "D D F D", ""),
    _r(
        "messages",
        "anthropic-version",
        "H H F H",
        "the gateway answers in the Messages API it speaks",
    ),
)

# Rules for request headers (``gateway.dialects.vendor_headers``), not body fields.
HEADER_FIELDS = frozenset({"anthropic-beta", "anthropic-version", "openai-beta"})

RULES_BY_KEY: Mapping[tuple[str, str], Rule] = {(r.dialect, r.field): r for r in RULES}


def rule(dialect: Wire, field: str) -> Rule | None:
    """The table's rule for ``field`` of ``dialect``, or None."""
    return RULES_BY_KEY.get((dialect, field))


# -- the docs --------------------------------------------------------------------------

_DIALECT_TITLES = {
    "chat": "`/v1/chat/completions`",
    "responses": "`/v1/responses`",
    "messages": "`/v1/messages`",
}


def render_markdown() -> str:
    """The table as ``docs/compatibility.md`` shows it (between its field-policy markers)."""
    lines: list[str] = []
    for dialect in ("chat", "responses", "messages"):
        lines.append(f"#### {_DIALECT_TITLES[dialect]}")
        lines.append("")
        lines.append(
            "| Field | chat upstream | Responses upstream | Messages upstream "
            "| local model | Note |"
        )
        lines.append("|---|---|---|---|---|---|")
        for r in RULES:
            if r.dialect != dialect:
                continue
            cells = []
            for target in TARGETS:
                outcome = r.outcome(target)
                mark = f"**{outcome}**" if target == dialect else outcome
                if any(name == target for name, _ in r.to):
                    mark += f" (`{r.target_field(target)}`)"
                cells.append(mark)
            name = f"`{r.field}`" + (" header" if r.field in HEADER_FIELDS else "")
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {r.note} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
