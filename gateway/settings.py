"""One frozen Settings object, read once from the config file and the environment.

Config is TOML (path from ``--config`` or ``SYNTIC_CONFIG``)::

    [[models]]
    name = "amara-s1.2"                 # what clients send as "model"
    provider = "openai"                 # openai | anthropic | local
    base_url = "http://127.0.0.1:9000/v1"
    upstream_model = "served-name"
    api_key_env = "UPSTREAM_API_KEY"    # optional
    strict_tools = true                 # capabilities.strict_tools
    constrained = false                 # upstream enforces schemas itself
    correction = "constrained"          # optional: the correction call under the schema
    engine = "vllm"                     # openai provider: the server (gateway/engines.py)
    constrained_field = "vllm"          # optional: override the engine's constrained field
    api = "chat_completions"            # or "responses": the upstream's /v1/responses
    max_tokens_field = "max_completion_tokens"  # or "max_tokens", for an engine that needs it
    strictify = false                   # make every tool strict (the strict projection)
    on_invalid = "error"                # or "tool_error": a 200 that says what went wrong

Every key is declared once, on its field (``key(...)``): its type is the annotation, and
the declaration adds the environment variable that overrides it and its bounds. The
reading, type checks, bounds, unknown-key errors and ``SYNTIC_*`` overrides are all derived
from those declarations (``_Spec``); what relates several keys is a rule function below.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import validator
from gateway.canonical.model import OnInvalid
from gateway.canonical.origin import Target
from gateway.engines import PROFILES, ConstrainedField, Engine, EngineProfile

# The one list of providers: each is the module gateway.upstream.<name> (its create()).
Provider = Literal["openai", "anthropic", "local"]
# How a correction call is decoded: like the first call, or under the tool's schema.
Correction = Literal["free", "constrained"]
# Which OpenAI wire format an openai-provider upstream speaks.
UpstreamApi = Literal["chat_completions", "responses"]
# The field a chat-completions upstream takes the token limit in (reasoning models refuse
# the deprecated max_tokens; some engines know only it).
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]

T = TypeVar("T")


class ConfigError(ValueError):
    """The config file or environment is unusable; the message says where."""


@dataclass(frozen=True, slots=True)
class Key:
    """A field read from the config: what its annotation does not say."""

    # The environment variable that overrides the file; True: SYNTIC_<NAME>, the rule for
    # the numeric settings (deploy/syntic.env.example states the rule, not each name).
    env: bool | str = False
    # Bounds of a number (inclusive); every number is at least 0 unless declared otherwise.
    low: float = 0
    high: float | None = None
    # Unset: the value of this other key.
    fallback: str | None = None
    # Sent in an upstream request's head, so refused with a control character in it.
    head: bool = False


_KEY = "syntic.key"  # the metadata entry a field's declaration is kept in


def key(
    default: T,
    *,
    env: bool | str = False,
    low: float = 0,
    high: float | None = None,
    head: bool = False,
) -> T:
    """A config key with a default (its field's annotation is its type)."""
    return field(default=default, metadata={_KEY: Key(env, low, high, None, head)})


def required(*, fallback: str | None = None, head: bool = False) -> Mapping[str, Key]:
    """The metadata of a config key without a default, ``field(metadata=required())``
    (a call mypy sees as no default): the table must set it, or ``fallback`` does."""
    return {_KEY: Key(fallback=fallback, head=head)}


# The metadata of a field that is not read from the config (declared so, not forgotten).
_UNREAD: Mapping[str, Key | None] = {_KEY: None}


@dataclass(frozen=True, slots=True)
class ModelConfig:
    name: str = field(metadata=required())
    provider: Provider = field(metadata=required())
    upstream_model: str = field(metadata=required(fallback="name", head=True))
    base_url: str = key("", head=True)
    api_key_env: str | None = key(None)
    strict_tools: bool = key(True)
    constrained: bool = key(False)
    # Every tool of every request made strict through the strict projection (docs/compatibility.md).
    strictify: bool = key(False)
    json_schema_output: bool = key(True)
    streaming: bool = key(True)
    timeout_s: float = key(60.0)
    # provider = "local": path to a GGUF file, or a model id the installer knows.
    local_model: str | None = key(None)
    # How to reach the upstream (gateway.upstream.connection): a CA bundle that replaces
    # the default trust store, a client certificate (and its key), a proxy URL.
    ca_file: str | None = key(None)
    client_cert: str | None = key(None)
    client_key: str | None = key(None)
    proxy: str | None = key(None, head=True)
    # None: "constrained" for provider = "local" (the gateway runs its decoder), else "free".
    correction: Correction | None = key(None)
    # provider = "openai": the inference server behind base_url (None: "openai"); its
    # profile says what it accepts (gateway.engines). constrained_field overrides the
    # profile's field for constrained output.
    engine: Engine | None = key(None)
    constrained_field: ConstrainedField | None = key(None)
    # provider = "openai": POST {base_url}/chat/completions, or {base_url}/responses.
    api: UpstreamApi = key("chat_completions")
    # api = "chat_completions": where a token limit from another wire goes.
    max_tokens_field: MaxTokensField = key("max_completion_tokens")
    # A strict call still invalid after its correction: a 422, or a 200 that says why.
    on_invalid: OnInvalid = key("error")
    # Upstream calls to this model in flight at once, per process (what its upstream can
    # serve); one key's requests hold at most model_share_per_key of them. 0: no bound of
    # its own (max_inflight and max_concurrent_per_key still apply).
    max_concurrent: int = key(0)

    @property
    def wire(self) -> Target:
        """The kind of upstream, as the field policy names it: the wire it speaks
        (``chat``, ``responses``, ``messages``) or ``local``."""
        if self.provider == "anthropic":
            return "messages"
        if self.provider == "local":
            return "local"
        return "responses" if self.api == "responses" else "chat"

    @property
    def profile(self) -> EngineProfile:
        """The engine profile of an OpenAI-compatible upstream (``openai`` when unset)."""
        return PROFILES[self.engine or "openai"]

    @property
    def output_field(self) -> ConstrainedField:
        """How this model's upstream is asked for output under a JSON schema."""
        return self.constrained_field or self.profile.constrained_field

    @property
    def constrained_correction(self) -> bool:
        """Whether a correction call asks the upstream to decode under the schema."""
        if self.correction is None:
            return self.provider == "local"
        return self.correction == "constrained"

    def api_key(self, env: Mapping[str, str]) -> str | None:
        """The upstream key, without the whitespace a secrets file leaves around it."""
        if self.api_key_env is None:
            return None
        key = env.get(self.api_key_env)
        return key.strip() if key is not None else None


@dataclass(frozen=True, slots=True)
class Settings:
    models: tuple[ModelConfig, ...] = field(metadata=_UNREAD)  # the [[models]] tables
    database_url: str = key("sqlite:///var/syntic.db", env="SYNTIC_DATABASE_URL")
    redis_url: str | None = key(None, env="SYNTIC_REDIS_URL")
    host: str = key("127.0.0.1")
    port: int = key(8080, high=65535)
    max_body_bytes: int = key(4 * 1024 * 1024, low=1, high=1 << 40)
    max_tools: int = field(default=128, metadata=_UNREAD)  # not configurable (docs)
    # Client JSON nested deeper than this is 400 invalid_json (orjson re-encodes up to 254).
    max_json_depth: int = key(128, env=True, low=8, high=200)
    # Messages / input items and the content blocks in them, counted together, one request
    # may carry (decoding costs per item); beyond -> 400 too_many_input_items.
    max_input_items: int = key(20_000, env=True, low=1, high=10_000_000)
    # A body of this many bytes or more is parsed, decoded and re-encoded in a worker
    # thread (gateway.offload), at most body_offload_workers at once; smaller ones inline.
    body_offload_bytes: int = key(256 * 1024, env=True, low=1024, high=1 << 40)
    body_offload_workers: int = key(2, env=True, low=1, high=64)
    key_hash_secret: str = key("syntic-dev-pepper", env="SYNTIC_KEY_SECRET")
    key_cache_ttl_s: float = key(2.0, env="SYNTIC_KEY_CACHE_TTL_S")
    request_timeout_s: float = key(120.0, env=True)
    stream_keepalive_s: float = key(15.0)  # SSE ": keep-alive" after this much silence
    # Edge limits.
    # Upstream-call slots in flight: one per metered request, n for n choices; beyond ->
    # 503 overloaded.
    max_inflight: int = key(512, env=True)
    # Slots one key's requests may hold at once (a key's own max_concurrent wins); beyond
    # -> 429 concurrency_limit_exceeded. 0: half of max_inflight.
    max_concurrent_per_key: int = key(0, env=True)
    # The part of a model's upstream slots (its max_concurrent) one key may hold; beyond
    # -> 429 concurrency_limit_exceeded, so another tenant always finds a slot.
    model_share_per_key: float = key(0.5, env=True, low=0.01, high=1.0)
    # Whole request body must arrive within this (else 408).
    body_timeout_s: float = key(30.0, env=True)
    keepalive_timeout_s: float = key(5.0, env=True)  # idle keep-alive connections closed after this
    max_header_bytes: int = key(32 * 1024, env=True)  # request line + headers (h11/httptools cap)
    # Extra attempts for safe failures (connect, 429/502/503).
    upstream_retries: int = key(2, env=True)
    # One tool call's arguments (validated on the loop).
    max_argument_bytes: int = key(512 * 1024, env=True)
    # One non-streaming upstream answer.
    max_upstream_body_bytes: int = key(16 * 1024 * 1024, env=True)
    # One streamed line or event, and a whole streamed answer (decompressed); 0 derives
    # them from max_argument_bytes (room for one call's arguments, escaped, in one event).
    max_stream_event_bytes: int = key(0, env=True)
    max_stream_bytes: int = key(0, env=True)
    # An idle upstream connection is kept this long.
    upstream_keepalive_s: float = key(90.0, env=True)
    idempotency_ttl_s: float = key(24 * 3600.0, env=True)
    # A running request's claim on its Idempotency-Key is a lease of this length, renewed
    # while it runs: a dead replica's claim lapses within it.
    idempotency_lease_s: float = key(5.0, env=True, low=1.0, high=60.0)
    # A retry that finds the key still running waits at most this long, then 409.
    idempotency_wait_s: float = key(10.0, env=True, high=300.0)
    # Rate-limit slots a busy key may reserve from Redis per round trip; 1: none.
    rate_limit_lease_max: int = key(64, env=True)
    # Canonical JSON bytes of compiled schemas kept per process (the validator's cache and
    # the lint cache), beside their 1,024-entry bound: large distinct schemas can't pin
    # gigabytes (a compiled schema takes ~10-20x its canonical size in memory).
    schema_cache_max_bytes: int = key(validator.DEFAULT_CACHE_MAX_BYTES, env=True, low=1)
    # Local files (the ledger spool); None: SYNTIC_DATA_DIR, else next to the SQLite file,
    # else ./var (gateway.storage.data_dir_for).
    data_dir: str | None = key(None, env="SYNTIC_DATA_DIR")
    # The ledger writes to the database this often (rows are in the local spool before
    # each response completes; the spool is fsynced at the same pace).
    ledger_flush_interval_s: float = key(0.2, env=True, low=0.01, high=10.0)
    # A new spool file past this size.
    ledger_spool_segment_bytes: int = key(4 * 1024 * 1024, env=True, low=64 * 1024, high=1024**3)
    # Rows kept in memory only (the spool refused them, the database is down) before new
    # requests are refused with 503 ledger_unavailable; about 1 KiB each.
    ledger_max_held_rows: int = key(10_000, env=True, low=1, high=10_000_000)
    # A stored response (POST /v1/responses with store) is kept this long, as the API does.
    responses_retention_s: float = key(30 * 86400.0, env=True, low=1.0, high=366 * 86400.0)
    # The largest stored conversation previous_response_id continues (the JSON of every
    # response in its chain): a continuation loads it whole.
    responses_max_history_bytes: int = key(16 * 1024 * 1024, env=True, low=1024, high=1024**3)
    # What one key may keep in stored responses (their JSON); past it store is refused.
    responses_max_bytes_per_key: int = key(1024**3, env=True, low=1024, high=1024**4)
    env: Mapping[str, str] = field(default_factory=dict, repr=False, metadata=_UNREAD)

    @property
    def stream_event_cap(self) -> int:
        return self.max_stream_event_bytes or 2 * self.max_argument_bytes + 64 * 1024

    @property
    def stream_cap(self) -> int:
        return self.max_stream_bytes or max(64 * self.max_argument_bytes, 16 * 1024 * 1024)

    def model(self, name: str) -> ModelConfig | None:
        for m in self.models:
            if m.name == name:
                return m
        return None


# The catalogue when no config file is given: the local Qwen model, installed with
# `syntic models install qwen2.5-0.5b`. The first name generates under the JSON-schema
# grammar (a new user's first requests should succeed); "-free" shows the correction loop;
# "-constrained" is the grammar one's earlier name, kept for clients that still send it.
DEFAULT_MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        name="qwen2.5-0.5b",
        provider="local",
        upstream_model="qwen2.5-0.5b",
        local_model="qwen2.5-0.5b",
        constrained=True,
        timeout_s=120.0,
    ),
    ModelConfig(
        name="qwen2.5-0.5b-free",
        provider="local",
        upstream_model="qwen2.5-0.5b",
        local_model="qwen2.5-0.5b",
        constrained=False,
        timeout_s=120.0,
    ),
    ModelConfig(
        name="qwen2.5-0.5b-constrained",
        provider="local",
        upstream_model="qwen2.5-0.5b",
        local_model="qwen2.5-0.5b",
        constrained=True,
        timeout_s=120.0,
    ),
)


@dataclass(frozen=True, slots=True)
class _Spec:
    """One config key as read: its declaration and what its annotation says."""

    name: str
    key: Key
    kind: type  # str, bool, int or float; str for a Literal
    choices: tuple[str, ...]  # a Literal's values, else ()
    optional: bool  # ``X | None``: unset is None
    required: bool  # no default and no fallback

    @property
    def env(self) -> str | None:
        if self.key.env is True:
            return "SYNTIC_" + self.name.upper()
        return self.key.env or None


def _specs(cls: type) -> dict[str, _Spec]:
    """Every config key ``cls`` declares, in field order; a field without a declaration,
    or of a type the reader does not know, is a programming error raised at import."""
    hints = get_type_hints(cls)
    out: dict[str, _Spec] = {}
    for f in fields(cls):
        if _KEY not in f.metadata:
            raise TypeError(
                f"{cls.__name__}.{f.name}: declare it with key(), required() or _UNREAD"
            )
        declared: Key | None = f.metadata[_KEY]
        if declared is None:
            continue
        kind: Any = hints[f.name]
        args = get_args(kind)
        optional = type(None) in args
        if optional:
            (kind,) = [a for a in args if a is not type(None)]
        choices: tuple[str, ...] = ()
        if get_origin(kind) is Literal:
            choices, kind = get_args(kind), str
        if kind not in (str, bool, int, float) or (kind is bool and declared.env):
            raise TypeError(f"{cls.__name__}.{f.name}: no reader for {kind!r} here")
        no_default = f.default is MISSING and f.default_factory is MISSING
        required = no_default and declared.fallback is None
        out[f.name] = _Spec(f.name, declared, kind, choices, optional, required)
    return out


def _show(bound: float) -> str:
    return str(int(bound)) if bound == int(bound) else f"{bound:g}"


def _value(spec: _Spec, raw: Any, where: str, text: bool) -> Any:
    """``raw`` checked against its declaration; ``text``: it came from the environment, so
    a number is parsed from its text (the file's values must have their TOML type)."""
    if spec.choices:
        if raw not in spec.choices:
            raise ConfigError(f"{where} must be one of {list(spec.choices)}")
        return raw
    if spec.kind is str:
        if not isinstance(raw, str):
            raise ConfigError(f"{where}: expected a string, got {raw!r}")
        return raw
    if spec.kind is bool:
        if not isinstance(raw, bool):
            raise ConfigError(f"{where}: expected true or false, got {raw!r}")
        return raw
    value: int | float
    if spec.kind is int:
        # TOML keeps integers and floats apart; a bool is not a number here.
        if text and isinstance(raw, str):
            try:
                value = int(raw)
            except ValueError as exc:
                raise ConfigError(f"{where}: expected an integer, got {raw!r}") from exc
        elif isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        else:
            raise ConfigError(f"{where}: expected an integer, got {raw!r}")
    else:
        if text and isinstance(raw, str):
            try:
                value = float(raw)
            except ValueError as exc:
                raise ConfigError(f"{where}: expected a number, got {raw!r}") from exc
        elif isinstance(raw, int | float) and not isinstance(raw, bool):
            value = float(raw)
        else:
            raise ConfigError(f"{where}: expected a number, got {raw!r}")
    low, high = spec.key.low, spec.key.high
    if math.isfinite(value) and low <= value and (high is None or value <= high):
        return value
    if high is not None:
        raise ConfigError(f"{where} must be between {_show(low)} and {_show(high)}")
    if low > 0:
        raise ConfigError(f"{where} must be at least {_show(low)}")
    if spec.kind is float:
        raise ConfigError(f"{where} must be a finite number, not negative")
    raise ConfigError(f"{where} must not be negative")


def _table(
    specs: Mapping[str, _Spec], table: Mapping[str, Any], where: str, env: Mapping[str, str]
) -> dict[str, Any]:
    """The declared keys ``table`` (and the environment) set, checked; unset ones are left
    to their field's default."""
    unknown = sorted(set(table) - set(specs))
    if unknown:  # a misspelt key would otherwise leave its default silently in force
        raise ConfigError(f"{where}: unknown key(s) {unknown}")
    out: dict[str, Any] = {}
    for name, spec in specs.items():
        variable = spec.env
        if name in table:  # checked even when the environment overrides it
            out[name] = _value(spec, table[name], f"{where}.{name}", False)
        if variable is not None and variable in env:
            out[name] = _value(spec, env[variable], f"{where}.{name} ({variable})", True)
        if name in out:
            continue
        if spec.required:
            raise ConfigError(f"{where}: missing {name!r}")
        if spec.key.fallback is not None:
            out[name] = out[spec.key.fallback]
    return out


_MODEL = _specs(ModelConfig)
# Every key a [[models]] table may hold.
MODEL_KEYS = frozenset(_MODEL)
# The keys whose values go into an upstream request's head.
_HEAD_KEYS = tuple(name for name, spec in _MODEL.items() if spec.key.head)
_SERVER = _specs(Settings)
# Every key a [server] table may hold.
SERVER_KEYS = frozenset(_SERVER)
# The [server] keys the environment overrides as SYNTIC_<NAME>.
_TUNABLES: tuple[str, ...] = tuple(
    name for name, spec in _SERVER.items() if spec.env == "SYNTIC_" + name.upper()
)


def _choices(name: str) -> list[str]:
    return list(_MODEL[name].choices)


def _check_correction(i: int, model: ModelConfig) -> None:
    """``correction`` / ``constrained_field`` / ``api`` / ``max_tokens_field``: set exactly
    where the gateway needs to know the engine (an OpenAI-compatible upstream)."""
    field_ = model.constrained_field
    provider = model.provider
    if model.api != "chat_completions" and provider != "openai":
        raise ConfigError(f'models[{i}].api applies to provider "openai" only')
    # The default spelled out is harmless anywhere (as api = "chat_completions" is).
    if model.max_tokens_field != "max_completion_tokens" and (
        provider != "openai" or model.api != "chat_completions"
    ):
        raise ConfigError(
            f'models[{i}].max_tokens_field applies to provider "openai" with '
            'api = "chat_completions" only'
        )
    if model.api == "responses" and field_ is not None:
        raise ConfigError(
            f'models[{i}]: constrained_field does not apply to api = "responses" '
            "(its strict mode is asked for with strict: true)"
        )
    if field_ is not None and provider != "openai":
        raise ConfigError(f'models[{i}].constrained_field applies to provider "openai" only')
    if model.correction == "constrained" and provider == "anthropic":
        raise ConfigError(
            f'models[{i}]: correction = "constrained" is not supported for provider "anthropic"'
        )
    _check_engine(i, model)
    if (
        model.correction == "constrained"
        and provider == "openai"
        and field_ is None
        and model.engine is None
    ):
        raise ConfigError(
            f'models[{i}]: correction = "constrained" needs engine (one of '
            f"{_choices('engine')}) or constrained_field (one of "
            f"{_choices('constrained_field')}): "
            "how the engine is asked for output under a JSON schema"
        )


def _check_engine(i: int, model: ModelConfig) -> None:
    """``engine``: on an OpenAI-compatible upstream, with an override its engine reads (a
    field the engine ignores would constrain nothing, silently)."""
    engine = model.engine
    if engine is None:
        return
    if model.provider != "openai":
        raise ConfigError(f'models[{i}].engine applies to provider "openai" only')
    if model.api != "chat_completions" and engine != "openai":
        raise ConfigError(
            f'models[{i}]: api = "responses" is supported for engine "openai" only '
            f"(engine {engine!r} is reached through chat completions)"
        )
    profile = PROFILES[engine]
    field_ = model.constrained_field
    if field_ is not None and field_ not in profile.accepted_fields:
        raise ConfigError(
            f"models[{i}]: engine {engine!r} does not read constrained_field {field_!r} "
            f"(it reads {sorted(profile.accepted_fields)}; leave it unset for "
            f"{profile.constrained_field!r})"
        )


def _model_from_table(i: int, table: Any) -> ModelConfig:
    if not isinstance(table, dict):
        raise ConfigError(f"models[{i}]: expected a table ([[models]])")
    model = ModelConfig(**_table(_MODEL, table, f"models[{i}]", {}))
    _check_correction(i, model)
    return model


def _has_control(value: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)


def _check_header_values(model: ModelConfig, env: Mapping[str, str]) -> None:
    """A value that would go into an upstream request's head with a control character in
    it (a CR LF would inject a header) is refused here, before anything is sent."""
    key = model.api_key(env)
    if key is not None and _has_control(key):
        raise ConfigError(
            f"model {model.name!r}: the upstream key in {model.api_key_env} contains a "
            "control character (after stripping surrounding whitespace)"
        )
    for name in _HEAD_KEYS:
        value = getattr(model, name)
        if isinstance(value, str) and _has_control(value):
            raise ConfigError(f"model {model.name!r}: {name} contains a control character")


def load_settings(
    config_path: str | Path | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Read the config file (if any) and ``SYNTIC_*`` environment variables, once."""
    env = dict(os.environ if env is None else env)
    path = config_path or env.get("SYNTIC_CONFIG")
    data: dict[str, Any] = {}
    if path:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
    tables = data.get("models", [])
    if not isinstance(tables, list):
        raise ConfigError("models: expected an array of tables ([[models]])")
    models = tuple(_model_from_table(i, t) for i, t in enumerate(tables))
    if not path:
        models = DEFAULT_MODELS  # no config at all: serve the embedded local model
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ConfigError("models: duplicate model name")
    for model in models:
        _check_header_values(model, env)
    unknown = sorted(set(data) - {"models", "server"})
    if unknown:
        raise ConfigError(f"unknown table(s) or key(s) {unknown}: expected [server], [[models]]")
    server = data.get("server", {})
    if not isinstance(server, dict):
        raise ConfigError("server: expected a table ([server])")
    values = _table(_SERVER, server, "server", env)
    for name, spec in _SERVER.items():
        if spec.optional and values.get(name) == "":
            values[name] = None  # set but empty (a blank variable, say): unset
    return Settings(models=models, env=env, **values)
