"""How the gateway reaches one model's upstream: its TLS material and its proxy.

Both are settled once per model at startup (``Connections.prepare``), never per call:
reading certificates from disk would stall the event loop.

- TLS (rustls, under ``gateway.upstream.transport``): the system trust store, plus the
  certificates of ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, plus a model's ``ca_file``
  (the client library has no switch to drop the system store, so a private CA is trusted
  beside it, not instead of it); ``client_cert`` (and ``client_key``) present a client
  certificate. Models with the same files share the same material.
- Proxy: a model's ``proxy`` wins; otherwise ``HTTPS_PROXY`` / ``HTTP_PROXY`` for the
  upstream's scheme (lower case first, as curl reads them) unless ``NO_PROXY`` matches the
  host. HTTPS goes through the proxy with CONNECT, HTTP in absolute form.

Example::

    connections = Connections(settings.env)
    connections.prepare(settings.models)
    route = connections.route(model)      # route.roots, route.identity, route.proxy
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from pyreqwest.client import ClientBuilder
from pyreqwest.exceptions import BuilderError

from gateway.canonical.record import record
from gateway.settings import ConfigError, ModelConfig

__all__ = ["Connections", "Route", "proxy_for"]

# The standard library's NO_PROXY matching (suffixes, "*", host:port), not in its stubs.
_bypass: Callable[[str, dict[str, str]], bool] = (
    urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
)


@record
class Route:
    """One model's connection settings: the PEM certificates trusted beside the system
    store, the client certificate and key (PEM) to present, and the proxy URL."""

    roots: tuple[bytes, ...]
    identity: bytes | None
    proxy: str | None


_END = b"-----END CERTIFICATE-----"


def certificates(pem: bytes) -> list[bytes]:
    """Each certificate of a PEM bundle on its own (the client library reads one per call)."""
    out = []
    for part in pem.split(_END)[:-1]:
        start = part.find(b"-----BEGIN CERTIFICATE-----")
        if start >= 0:
            out.append(part[start:] + _END + b"\n")
    return out


def _bundle_dir(path: str) -> list[bytes]:
    found: list[bytes] = []
    for entry in sorted(Path(path).iterdir()):
        if entry.is_file():
            found.extend(certificates(entry.read_bytes()))
    return found


def check_material(route: Route) -> None:
    """Build a client with ``route``'s TLS material once, so that a file the TLS library
    refuses fails at startup, not on the first call."""
    builder = ClientBuilder()
    for cert in route.roots:
        builder = builder.add_root_certificate_pem(cert)
    if route.identity is not None:
        builder = builder.identity_pem(route.identity)
    builder.build()


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
        self._material: dict[
            tuple[str | None, str | None, str | None], tuple[tuple[bytes, ...], bytes | None]
        ] = {}
        self._routes: dict[ModelConfig, Route] = {}

    def prepare(self, models: Iterable[ModelConfig]) -> None:
        """Build every HTTP model's route now (at startup, before serving); an unreadable
        CA bundle or certificate is a ``ConfigError`` naming the model."""
        for model in models:
            if model.provider == "local":
                continue
            try:
                check_material(self.route(model))
            except (OSError, BuilderError) as exc:
                raise ConfigError(
                    f"model {model.name!r}: its TLS files could not be loaded ({exc})"
                ) from exc

    def route(self, model: ModelConfig) -> Route:
        found = self._routes.get(model)
        if found is None:
            roots, identity = self._tls(model.ca_file, model.client_cert, model.client_key)
            found = self._routes[model] = Route(
                roots, identity, model.proxy or proxy_for(model.base_url, self._env)
            )
        return found

    def _tls(
        self, ca_file: str | None, cert: str | None, key: str | None
    ) -> tuple[tuple[bytes, ...], bytes | None]:
        found = self._material.get((ca_file, cert, key))
        if found is None:
            roots: list[bytes] = []
            cafile = self._env.get("SSL_CERT_FILE") or None
            capath = self._env.get("SSL_CERT_DIR") or None
            for path in (cafile, ca_file):
                if path is not None:
                    roots.extend(certificates(Path(path).read_bytes()))
            if capath is not None:
                for part in capath.split(os.pathsep):
                    roots.extend(_bundle_dir(part))
            if (ca_file or cafile) and not roots:
                raise OSError(f"no PEM certificate in {ca_file or cafile}")
            identity = None
            if cert is not None:
                identity = Path(cert).read_bytes()
                if key is not None:
                    identity += b"\n" + Path(key).read_bytes()
            found = self._material[(ca_file, cert, key)] = (tuple(roots), identity)
        return found
