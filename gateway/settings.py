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
    strictify = false                   # make every tool strict (the strict projection)
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import validator

Provider = Literal["openai", "anthropic", "local"]


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

    def api_key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key_env is None:
            return None
        return env.get(self.api_key_env)


@dataclass(frozen=True, slots=True)
class Settings:
    models: tuple[ModelConfig, ...]
    database_url: str = "sqlite:///var/syntic.db"
    redis_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 4 * 1024 * 1024
    max_tools: int = 128
    key_hash_secret: str = "syntic-dev-pepper"
    key_cache_ttl_s: float = 2.0
    request_timeout_s: float = 120.0
    stream_keepalive_s: float = 15.0  # SSE ": keep-alive" after this much silence (#4)
    # Edge limits (#9); each readable from [server] and SYNTIC_<NAME> (see _TUNABLES).
    max_inflight: int = 512  # metered requests in flight; beyond -> 503 overloaded
    body_timeout_s: float = 30.0  # whole request body must arrive within this (else 408)
    keepalive_timeout_s: float = 5.0  # idle keep-alive connections closed after this
    max_header_bytes: int = 32 * 1024  # request line + headers (h11/httptools cap)
    upstream_retries: int = 2  # extra attempts for safe failures (connect, 429/502/503)
    max_argument_bytes: int = 512 * 1024  # one tool call's arguments (validated on the loop)
    max_upstream_body_bytes: int = 16 * 1024 * 1024  # one non-streaming upstream answer
    idempotency_ttl_s: float = 24 * 3600.0
    # Rate-limit slots a busy key may reserve from Redis per round trip (#8); 1: none.
    rate_limit_lease_max: int = 64
    # Canonical JSON bytes of compiled schemas kept per process (the validator's cache and
    # the lint cache), beside their 1,024-entry bound: large distinct schemas can't pin
    # gigabytes (a compiled schema takes ~10-20x its canonical size in memory).
    schema_cache_max_bytes: int = validator.DEFAULT_CACHE_MAX_BYTES
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    def model(self, name: str) -> ModelConfig | None:
        for m in self.models:
            if m.name == name:
                return m
        return None


# Slotted dataclass defaults aren't readable as class attributes (they're slot
# descriptors), so load_settings reads them from a default instance.
_DEFAULTS = Settings(models=())
# The catalogue when no config file is given: the local Qwen model, installed with
# `syntic models install qwen2.5-0.5b` (issue #10), free and grammar-constrained.
DEFAULT_MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        name="qwen2.5-0.5b",
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
_PROVIDERS = ("openai", "anthropic", "local")


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
    try:
        return ModelConfig(**values)
    except TypeError as exc:
        raise ConfigError(f"models[{i}]: {exc}") from exc


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
        models = DEFAULT_MODELS  # no config at all: serve the embedded local model (#10)
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ConfigError("models: duplicate model name")
    server = data.get("server", {})
    return Settings(
        models=models,
        database_url=env.get(
            "SYNTIC_DATABASE_URL", server.get("database_url", _DEFAULTS.database_url)
        ),
        redis_url=env.get("SYNTIC_REDIS_URL", server.get("redis_url")) or None,
        host=server.get("host", _DEFAULTS.host),
        port=int(server.get("port", _DEFAULTS.port)),
        max_body_bytes=int(server.get("max_body_bytes", _DEFAULTS.max_body_bytes)),
        stream_keepalive_s=float(
            server.get("stream_keepalive_s", _DEFAULTS.stream_keepalive_s)
        ),
        key_hash_secret=env.get(
            "SYNTIC_KEY_SECRET", server.get("key_hash_secret", _DEFAULTS.key_hash_secret)
        ),
        key_cache_ttl_s=float(
            env.get(
                "SYNTIC_KEY_CACHE_TTL_S", server.get("key_cache_ttl_s", _DEFAULTS.key_cache_ttl_s)
            )
        ),
        env=env,
        **_tunables(server, env),
    )


# Numeric [server] settings that the environment may override as SYNTIC_<NAME upper>.
_TUNABLES: tuple[str, ...] = (
    "request_timeout_s",
    "max_inflight",
    "body_timeout_s",
    "keepalive_timeout_s",
    "max_header_bytes",
    "upstream_retries",
    "max_argument_bytes",
    "max_upstream_body_bytes",
    "idempotency_ttl_s",
    "rate_limit_lease_max",
    "schema_cache_max_bytes",
)
_AT_LEAST_ONE = frozenset({"schema_cache_max_bytes"})


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
        out[name] = value
    return out
