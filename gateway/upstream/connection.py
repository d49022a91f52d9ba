"""How the gateway reaches one model's upstream: its TLS context and its proxy.

Both are settled once per model at startup (``Connections.prepare``), never per call: a TLS
context loads its CA bundle from disk, which would stall the event loop.

- TLS: the system trust store, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set; a model's
  ``ca_file`` replaces it for that model; ``client_cert`` (and ``client_key``) present a
  client certificate. Models with the same files share one context.
- Proxy: a model's ``proxy`` wins; otherwise ``HTTPS_PROXY`` / ``HTTP_PROXY`` for the
  upstream's scheme (lower case first, as curl reads them) unless ``NO_PROXY`` matches the
  host. HTTPS goes through the proxy with CONNECT, HTTP in absolute form.

Example::

    connections = Connections(settings.env)
    connections.prepare(settings.models)
    route = connections.route(model)      # route.ssl, route.proxy
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

from gateway.canonical.record import record
from gateway.settings import ConfigError, ModelConfig

__all__ = ["Connections", "Route", "proxy_for"]

# The standard library's NO_PROXY matching (suffixes, "*", host:port), not in its stubs.
_bypass: Callable[[str, dict[str, str]], bool] = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]


@record
class Route:
    """One model's connection settings: the TLS context for https and the proxy URL."""

    ssl: ssl.SSLContext
    proxy: str | None


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name.lower()) or env.get(name.upper())
    return value.strip() or None if value else None


def proxy_for(url: str, env: Mapping[str, str]) -> str | None:
    """The proxy the environment names for ``url``, or None (direct)."""
    parts = urlsplit(url)
    proxy = _env(env, f"{parts.scheme}_proxy") or _env(env, "all_proxy")
    if proxy is None:
        return None
    no_proxy = _env(env, "no_proxy")
    if no_proxy and _bypass(parts.netloc, {"no": no_proxy}):
        return None
    return proxy


class Connections:
    """The routes of the configured models, each built once."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self._contexts: dict[tuple[str | None, str | None, str | None], ssl.SSLContext] = {}
        self._routes: dict[ModelConfig, Route] = {}

    def prepare(self, models: Iterable[ModelConfig]) -> None:
        """Build every HTTP model's route now (at startup, before serving); an unreadable
        CA bundle or certificate is a ``ConfigError`` naming the model."""
        for model in models:
            if model.provider == "local":
                continue
            try:
                self.route(model)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"model {model.name!r}: its TLS files could not be loaded ({exc})"
                ) from exc

    def route(self, model: ModelConfig) -> Route:
        found = self._routes.get(model)
        if found is None:
            found = self._routes[model] = Route(
                self._context(model.ca_file, model.client_cert, model.client_key),
                model.proxy or proxy_for(model.base_url, self._env),
            )
        return found

    def _context(self, ca_file: str | None, cert: str | None, key: str | None) -> ssl.SSLContext:
        found = self._contexts.get((ca_file, cert, key))
        if found is None:
            if ca_file is not None:
                found = ssl.create_default_context(cafile=ca_file)
            else:
                cafile = self._env.get("SSL_CERT_FILE") or None
                capath = self._env.get("SSL_CERT_DIR") or None
                found = ssl.create_default_context(cafile=cafile, capath=capath)
            if cert is not None:
                found.load_cert_chain(cert, key)
            self._contexts[(ca_file, cert, key)] = found
        return found
