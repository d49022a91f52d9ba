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
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

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


class ConfigError(ValueError):
    """The config file or environment is unusable; the message says where."""


@dataclass(frozen=True, slots=True)
class ModelConfig:
    name: str
    provider: Provider
    upstream_model: str
    base_url: str = ""
    api_key_env: str | None = None
    strict_tools: bool = True
    constrained: bool = False
    # Every tool of every request made strict through the strict projection (docs/compatibility.md).
    strictify: bool = False
    json_schema_output: bool = True
    streaming: bool = True
    timeout_s: float = 60.0
    # provider = "local": path to a GGUF file, or a model id the installer knows.
    local_model: str | None = None
    # How to reach the upstream (gateway.upstream.connection): a CA bundle that replaces
    # the default trust store, a client certificate (and its key), a proxy URL.
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    proxy: str | None = None
    # None: "constrained" for provider = "local" (the gateway runs its decoder), else "free".
    correction: Correction | None = None
    # provider = "openai": the inference server behind base_url (None: "openai"); its
    # profile says what it accepts (gateway.engines). constrained_field overrides the
    # profile's field for constrained output.
    engine: Engine | None = None
    constrained_field: ConstrainedField | None = None
    # provider = "openai": POST {base_url}/chat/completions, or {base_url}/responses.
    api: UpstreamApi = "chat_completions"
    # api = "chat_completions": where a token limit from another wire goes.
    max_tokens_field: MaxTokensField = "max_completion_tokens"
    # A strict call still invalid after its correction: a 422, or a 200 that says why.
    on_invalid: OnInvalid = "error"
    # Upstream calls to this model in flight at once, per process (what its upstream can
    # serve); one key's requests hold at most model_share_per_key of them. 0: no bound of
    # its own (max_inflight and max_concurrent_per_key still apply).
    max_concurrent: int = 0

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
    models: tuple[ModelConfig, ...]
    database_url: str = "sqlite:///var/syntic.db"
    redis_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 4 * 1024 * 1024
    max_tools: int = 128
    # Client JSON nested deeper than this is 400 invalid_json (orjson re-encodes up to 254).
    max_json_depth: int = 128
    # Messages / input items and the content blocks in them, counted together, one request
    # may carry (decoding costs per item); beyond -> 400 too_many_input_items.
    max_input_items: int = 20_000
    # A body of this many bytes or more is parsed, decoded and re-encoded in a worker
    # thread (gateway.offload), at most body_offload_workers at once; smaller ones inline.
    body_offload_bytes: int = 256 * 1024
    body_offload_workers: int = 2
    key_hash_secret: str = "syntic-dev-pepper"
    key_cache_ttl_s: float = 2.0
    request_timeout_s: float = 120.0
    stream_keepalive_s: float = 15.0  # SSE ": keep-alive" after this much silence
    # Edge limits; each readable from [server] and SYNTIC_<NAME> (see _TUNABLES).
    # Upstream-call slots in flight: one per metered request, n for n choices; beyond ->
    # 503 overloaded.
    max_inflight: int = 512
    # Slots one key's requests may hold at once (a key's own max_concurrent wins); beyond
    # -> 429 concurrency_limit_exceeded. 0: half of max_inflight.
    max_concurrent_per_key: int = 0
    # The part of a model's upstream slots (its max_concurrent) one key may hold; beyond
    # -> 429 concurrency_limit_exceeded, so another tenant always finds a slot.
    model_share_per_key: float = 0.5
    body_timeout_s: float = 30.0  # whole request body must arrive within this (else 408)
    keepalive_timeout_s: float = 5.0  # idle keep-alive connections closed after this
    max_header_bytes: int = 32 * 1024  # request line + headers (h11/httptools cap)
    upstream_retries: int = 2  # extra attempts for safe failures (connect, 429/502/503)
    max_argument_bytes: int = 512 * 1024  # one tool call's arguments (validated on the loop)
    max_upstream_body_bytes: int = 16 * 1024 * 1024  # one non-streaming upstream answer
    # One streamed line or event, and a whole streamed answer (decompressed); 0 derives
    # them from max_argument_bytes (room for one call's arguments, escaped, in one event).
    max_stream_event_bytes: int = 0
    max_stream_bytes: int = 0
    upstream_keepalive_s: float = 90.0  # an idle upstream connection is kept this long
    idempotency_ttl_s: float = 24 * 3600.0
    # A running request's claim on its Idempotency-Key is a lease of this length, renewed
    # while it runs: a dead replica's claim lapses within it.
    idempotency_lease_s: float = 5.0
    # A retry that finds the key still running waits at most this long, then 409.
    idempotency_wait_s: float = 10.0
    # Rate-limit slots a busy key may reserve from Redis per round trip; 1: none.
    rate_limit_lease_max: int = 64
    # Canonical JSON bytes of compiled schemas kept per process (the validator's cache and
    # the lint cache), beside their 1,024-entry bound: large distinct schemas can't pin
    # gigabytes (a compiled schema takes ~10-20x its canonical size in memory).
    schema_cache_max_bytes: int = validator.DEFAULT_CACHE_MAX_BYTES
    # Local files (the ledger spool); None: SYNTIC_DATA_DIR, else next to the SQLite file,
    # else ./var (gateway.storage.data_dir_for).
    data_dir: str | None = None
    # The ledger writes to the database this often (rows are in the local spool before
    # each response completes; the spool is fsynced at the same pace).
    ledger_flush_interval_s: float = 0.2
    ledger_spool_segment_bytes: int = 4 * 1024 * 1024  # a new spool file past this size
    # Rows kept in memory only (the spool refused them, the database is down) before new
    # requests are refused with 503 ledger_unavailable; about 1 KiB each.
    ledger_max_held_rows: int = 10_000
    # A stored response (POST /v1/responses with store) is kept this long, as the API does.
    responses_retention_s: float = 30 * 86400.0
    # The largest stored conversation previous_response_id continues (the JSON of every
    # response in its chain): a continuation loads it whole.
    responses_max_history_bytes: int = 16 * 1024 * 1024
    # What one key may keep in stored responses (their JSON); past it store is refused.
    responses_max_bytes_per_key: int = 1024**3
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

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


# Slotted dataclass defaults aren't readable as class attributes (they're slot
# descriptors), so load_settings reads them from a default instance.
_DEFAULTS = Settings(models=())
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

_MODEL_KEYS = {f for f in ModelConfig.__dataclass_fields__}
_PROVIDERS: tuple[str, ...] = get_args(Provider)


def _model_from_table(i: int, table: Mapping[str, Any]) -> ModelConfig:
    unknown = set(table) - _MODEL_KEYS
    if unknown:
        raise ConfigError(f"models[{i}]: unknown key(s) {sorted(unknown)}")
    for required in ("name", "provider"):
        if required not in table:
            raise ConfigError(f"models[{i}]: missing {required!r}")
    if table["provider"] not in _PROVIDERS:
        raise ConfigError(f"models[{i}].provider must be one of {list(_PROVIDERS)}")
    values = dict(table)
    values.setdefault("upstream_model", values["name"])
    concurrent = values.get("max_concurrent", 0)
    if isinstance(concurrent, bool) or not isinstance(concurrent, int) or concurrent < 0:
        raise ConfigError(f"models[{i}].max_concurrent must be an integer, 0 or more")
    _check_correction(i, values)
    if values.get("on_invalid", "error") not in get_args(OnInvalid):
        raise ConfigError(f"models[{i}].on_invalid must be one of {list(get_args(OnInvalid))}")
    try:
        return ModelConfig(**values)
    except TypeError as exc:
        raise ConfigError(f"models[{i}]: {exc}") from exc


_CORRECTIONS = ("free", "constrained")
_CONSTRAINED_FIELDS: tuple[str, ...] = get_args(ConstrainedField)
_ENGINES: tuple[str, ...] = get_args(Engine)
_APIS = ("chat_completions", "responses")
_MAX_TOKENS_FIELDS = ("max_completion_tokens", "max_tokens")


def _check_correction(i: int, values: Mapping[str, Any]) -> None:
    """``correction`` / ``constrained_field``: known values, and a field exactly where the
    gateway needs to know the engine (an OpenAI-compatible upstream)."""
    correction = values.get("correction")
    field_ = values.get("constrained_field")
    provider = values["provider"]
    if correction is not None and correction not in _CORRECTIONS:
        raise ConfigError(f"models[{i}].correction must be one of {list(_CORRECTIONS)}")
    if field_ is not None and field_ not in _CONSTRAINED_FIELDS:
        raise ConfigError(
            f"models[{i}].constrained_field must be one of {list(_CONSTRAINED_FIELDS)}"
        )
    api = values.get("api", "chat_completions")
    if api not in _APIS:
        raise ConfigError(f"models[{i}].api must be one of {list(_APIS)}")
    if api != "chat_completions" and provider != "openai":
        raise ConfigError(f'models[{i}].api applies to provider "openai" only')
    tokens_field = values.get("max_tokens_field")
    if tokens_field is not None:
        if tokens_field not in _MAX_TOKENS_FIELDS:
            raise ConfigError(
                f"models[{i}].max_tokens_field must be one of {list(_MAX_TOKENS_FIELDS)}"
            )
        # The default spelled out is harmless anywhere (as api = "chat_completions" is).
        if tokens_field != "max_completion_tokens" and (
            provider != "openai" or api != "chat_completions"
        ):
            raise ConfigError(
                f'models[{i}].max_tokens_field applies to provider "openai" with '
                'api = "chat_completions" only'
            )
    if api == "responses" and field_ is not None:
        raise ConfigError(
            f'models[{i}]: constrained_field does not apply to api = "responses" '
            "(its strict mode is asked for with strict: true)"
        )
    if field_ is not None and provider != "openai":
        raise ConfigError(f'models[{i}].constrained_field applies to provider "openai" only')
    if correction == "constrained" and provider == "anthropic":
        raise ConfigError(
            f'models[{i}]: correction = "constrained" is not supported for provider "anthropic"'
        )
    _check_engine(i, values)
    if (
        correction == "constrained"
        and provider == "openai"
        and field_ is None
        and values.get("engine") is None
    ):
        raise ConfigError(
            f'models[{i}]: correction = "constrained" needs engine (one of '
            f"{list(_ENGINES)}) or constrained_field (one of {list(_CONSTRAINED_FIELDS)}): "
            "how the engine is asked for output under a JSON schema"
        )


def _check_engine(i: int, values: Mapping[str, Any]) -> None:
    """``engine``: a known profile, on an OpenAI-compatible upstream, with an override its
    engine reads (a field the engine ignores would constrain nothing, silently)."""
    engine = values.get("engine")
    if engine is None:
        return
    if engine not in _ENGINES:
        raise ConfigError(f"models[{i}].engine must be one of {list(_ENGINES)}")
    if values["provider"] != "openai":
        raise ConfigError(f'models[{i}].engine applies to provider "openai" only')
    if values.get("api", "chat_completions") != "chat_completions" and engine != "openai":
        raise ConfigError(
            f'models[{i}]: api = "responses" is supported for engine "openai" only '
            f"(engine {engine!r} is reached through chat completions)"
        )
    profile = PROFILES[engine]
    field_ = values.get("constrained_field")
    if field_ is not None and field_ not in profile.accepted_fields:
        raise ConfigError(
            f"models[{i}]: engine {engine!r} does not read constrained_field {field_!r} "
            f"(it reads {sorted(profile.accepted_fields)}; leave it unset for "
            f"{profile.constrained_field!r})"
        )


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
    for name in ("base_url", "upstream_model", "proxy"):
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
    models = tuple(_model_from_table(i, t) for i, t in enumerate(data.get("models", [])))
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
    server = _server_table(data.get("server", {}))
    return Settings(
        models=models,
        database_url=env.get(
            "SYNTIC_DATABASE_URL", _text(server, "database_url", _DEFAULTS.database_url)
        ),
        redis_url=env.get("SYNTIC_REDIS_URL", _optional_text(server, "redis_url")) or None,
        host=_text(server, "host", _DEFAULTS.host),
        port=_integer(server, "port", _DEFAULTS.port, 0, 65535),
        max_body_bytes=_integer(server, "max_body_bytes", _DEFAULTS.max_body_bytes, 1, 1 << 40),
        stream_keepalive_s=_number(
            "stream_keepalive_s", server.get("stream_keepalive_s"), _DEFAULTS.stream_keepalive_s
        ),
        key_hash_secret=env.get(
            "SYNTIC_KEY_SECRET", _text(server, "key_hash_secret", _DEFAULTS.key_hash_secret)
        ),
        key_cache_ttl_s=_number(
            "key_cache_ttl_s",
            env.get("SYNTIC_KEY_CACHE_TTL_S", server.get("key_cache_ttl_s")),
            _DEFAULTS.key_cache_ttl_s,
        ),
        data_dir=env.get("SYNTIC_DATA_DIR", _optional_text(server, "data_dir")) or None,
        env=env,
        **_tunables(server, env),
    )


# [server] keys read directly (not through _TUNABLES).
_SERVER_KEYS = frozenset(
    {"database_url", "redis_url", "host", "port", "max_body_bytes", "stream_keepalive_s",
     "key_hash_secret", "key_cache_ttl_s", "data_dir"}
)  # fmt: skip


def _server_table(server: Any) -> Mapping[str, Any]:
    if not isinstance(server, dict):
        raise ConfigError("server: expected a table ([server])")
    unknown = sorted(set(server) - SERVER_KEYS)
    if unknown:  # a misspelt key would otherwise leave its default silently in force
        raise ConfigError(f"server: unknown key(s) {unknown}")
    return server


def _optional_text(server: Mapping[str, Any], name: str) -> str | None:
    value = server.get(name)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"server.{name}: expected a string, got {value!r}")
    return value


def _text(server: Mapping[str, Any], name: str, default: str) -> str:
    value = _optional_text(server, name)
    return default if value is None else value


def _number(name: str, raw: Any, default: float) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"server.{name}: expected a number, got {raw!r}") from exc
    if not 0 <= value < float("inf"):
        raise ConfigError(f"server.{name} must be a finite number, not negative")
    return value


def _integer(server: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    raw = server.get(name, default)
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ConfigError(f"server.{name}: expected an integer, got {raw!r}")
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"server.{name}: expected an integer, got {raw!r}") from exc
    if not low <= value <= high:
        raise ConfigError(f"server.{name} must be between {low} and {high}")
    return value


# Numeric [server] settings that the environment may override as SYNTIC_<NAME upper>.
_TUNABLES: tuple[str, ...] = (
    "request_timeout_s",
    "max_inflight",
    "max_concurrent_per_key",
    "body_timeout_s",
    "keepalive_timeout_s",
    "max_header_bytes",
    "upstream_retries",
    "max_argument_bytes",
    "max_upstream_body_bytes",
    "max_stream_event_bytes",
    "max_stream_bytes",
    "upstream_keepalive_s",
    "idempotency_ttl_s",
    "idempotency_lease_s",
    "idempotency_wait_s",
    "rate_limit_lease_max",
    "schema_cache_max_bytes",
    "ledger_flush_interval_s",
    "ledger_spool_segment_bytes",
    "ledger_max_held_rows",
    "responses_retention_s",
    "responses_max_history_bytes",
    "responses_max_bytes_per_key",
    "max_json_depth",
    "max_input_items",
    "body_offload_bytes",
    "body_offload_workers",
    "model_share_per_key",
)
_AT_LEAST_ONE = frozenset({"schema_cache_max_bytes"})
# Settings that only make sense within a range (a zero flush interval would spin).
_RANGES: dict[str, tuple[float, float]] = {
    "ledger_flush_interval_s": (0.01, 10.0),
    "ledger_spool_segment_bytes": (64 * 1024, 1024**3),
    "ledger_max_held_rows": (1, 10_000_000),
    "idempotency_lease_s": (1.0, 60.0),
    "idempotency_wait_s": (0.0, 300.0),
    "responses_retention_s": (1.0, 366 * 86400.0),
    "responses_max_history_bytes": (1024, 1024**3),
    "responses_max_bytes_per_key": (1024, 1024**4),
    "max_json_depth": (8, 200),
    "max_input_items": (1, 10_000_000),
    "body_offload_bytes": (1024, 1 << 40),
    "body_offload_workers": (1, 64),
    "model_share_per_key": (0.01, 1.0),
}


# Every key a [server] table may hold.
SERVER_KEYS = _SERVER_KEYS | frozenset(_TUNABLES)


def _tunables(server: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _TUNABLES:
        raw = env.get("SYNTIC_" + name.upper(), server.get(name))
        if raw is None:
            continue
        cast = type(getattr(_DEFAULTS, name))
        try:
            value = cast(raw)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"server.{name}: expected a number, got {raw!r}") from exc
        if value < 0:
            raise ConfigError(f"server.{name} must not be negative")
        if value < 1 and name in _AT_LEAST_ONE:
            raise ConfigError(f"server.{name} must be at least 1")
        low, high = _RANGES.get(name, (value, value))
        if not low <= value <= high:
            raise ConfigError(f"server.{name} must be between {low:g} and {high:g}")
        out[name] = value
    return out
