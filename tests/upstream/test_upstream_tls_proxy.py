"""Reaching real providers: HTTPS with a private CA, client certificates, proxies (the
standard variables and a model's ``proxy``), idle connections kept for reuse, and TLS
contexts built once at startup, never per connection."""

from __future__ import annotations

import asyncio
import secrets
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from gateway.canonical import ChatRequest, Message, TextPart
from gateway.settings import ModelConfig
from gateway.upstream.connection import Connections, proxy_for
from gateway.upstream.openai import OpenAIUpstream
from gateway.upstream.transport import UpstreamHttp
from tests.support.forward_proxy import ForwardProxy
from tests.support.gateway_proc import (
    GatewayProcess,
    free_port,
    model_table,
    start_gateway,
)
from tests.support.hostile_upstream import HostileUpstream, wait_until


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pki(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The CA's certificate and a client certificate it issued, as files."""
    out = tmp_path_factory.mktemp("pki")
    ca.cert_pem.write_to_path(str(out / "ca.pem"))
    client = ca.issue_cert("gateway-client")
    client.private_key_and_cert_chain_pem.write_to_path(str(out / "client.pem"))
    return {"ca": out / "ca.pem", "client": out / "client.pem"}


def _server_context(ca: trustme.CA, *, require_client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(ctx)
    if require_client_cert:
        ca.configure_trust(ctx)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


@pytest.fixture(scope="module")
def tls_upstream(ca: trustme.CA) -> Iterator[HostileUpstream]:
    with HostileUpstream(tls=_server_context(ca)) as up:
        yield up


@pytest.fixture(scope="module")
def mtls_upstream(ca: trustme.CA) -> Iterator[HostileUpstream]:
    with HostileUpstream(tls=_server_context(ca, require_client_cert=True)) as up:
        yield up


@pytest.fixture(scope="module")
def plain_upstream() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy() as p:
        yield p


def _ask(gw: GatewayProcess, model: str) -> httpx.Response:
    text = secrets.token_hex(6)
    resp = httpx.post(
        gw.base_url + "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": text}]},
        headers={"authorization": f"Bearer {gw.api_key}"},
        timeout=30,
    )
    if resp.status_code == 200:
        assert resp.json()["choices"][0]["message"]["content"] == f"echo: {text}"
    return resp


def _code(resp: httpx.Response) -> tuple[int, str]:
    return resp.status_code, resp.json()["error"]["code"] if resp.status_code != 200 else ""


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory,
    pki: dict[str, Path],
    tls_upstream: HostileUpstream,
    mtls_upstream: HostileUpstream,
    plain_upstream: HostileUpstream,
    proxy: ForwardProxy,
) -> Iterator[GatewayProcess]:
    ca_file = str(pki["ca"])
    models = [
        model_table("tls-ca", tls_upstream.base_url("ok", "localhost"), ca_file=ca_file),
        model_table("tls-untrusted", tls_upstream.base_url("ok", "localhost")),
        model_table(
            "mtls", mtls_upstream.base_url("ok"), ca_file=ca_file, client_cert=str(pki["client"])
        ),
        model_table("mtls-no-cert", mtls_upstream.base_url("ok"), ca_file=ca_file),
        model_table("via-proxy", plain_upstream.base_url("ok"), proxy=proxy.url),
        model_table(
            "tls-via-proxy",
            tls_upstream.base_url("ok", "localhost"),
            ca_file=ca_file,
            proxy=proxy.url,
        ),
        model_table(
            "dead-proxy", plain_upstream.base_url("ok"), proxy=f"http://127.0.0.1:{free_port()}"
        ),
    ]
    g = start_gateway(tmp_path_factory.mktemp("tls"), models, server={"upstream_retries": 0})
    yield g
    g.stop()


def test_private_ca_per_model(gw: GatewayProcess) -> None:
    assert _ask(gw, "tls-ca").status_code == 200
    # The same server without its CA: refused by verification, nothing sent.
    assert _code(_ask(gw, "tls-untrusted")) == (502, "upstream_unavailable")


def test_client_certificate(gw: GatewayProcess) -> None:
    assert _ask(gw, "mtls").status_code == 200
    assert _ask(gw, "mtls-no-cert").status_code == 502


def test_model_proxy_plain_http_in_absolute_form(
    gw: GatewayProcess, proxy: ForwardProxy, plain_upstream: HostileUpstream
) -> None:
    before = len(proxy.seen)
    assert _ask(gw, "via-proxy").status_code == 200
    assert ("POST", plain_upstream.base_url("ok") + "/chat/completions") in proxy.seen[before:]


def test_model_proxy_https_through_connect(
    gw: GatewayProcess, proxy: ForwardProxy, tls_upstream: HostileUpstream
) -> None:
    before = len(proxy.seen)
    for _ in range(2):
        assert _ask(gw, "tls-via-proxy").status_code == 200
    tunnels = [s for s in proxy.seen[before:] if s[0] == "CONNECT"]
    # one tunnel for both calls: the TLS connection through it was kept and reused
    assert tunnels == [("CONNECT", f"localhost:{tls_upstream.port}")]


def test_unreachable_proxy_is_an_unavailable_upstream(gw: GatewayProcess) -> None:
    assert _code(_ask(gw, "dead-proxy")) == (502, "upstream_unavailable")


def test_environment_proxies_and_no_proxy(
    tmp_path: Path,
    pki: dict[str, Path],
    tls_upstream: HostileUpstream,
    plain_upstream: HostileUpstream,
    proxy: ForwardProxy,
) -> None:
    """HTTP_PROXY / HTTPS_PROXY / NO_PROXY as curl reads them; SSL_CERT_FILE trusted."""
    models = [
        model_table("env-http", plain_upstream.base_url("ok")),
        model_table("env-https", tls_upstream.base_url("ok", "127.0.0.1")),
        model_table("env-https-direct", tls_upstream.base_url("ok", "localhost")),
    ]
    env = {
        "HTTP_PROXY": proxy.url,
        "https_proxy": proxy.url,
        "NO_PROXY": "localhost",
        "SSL_CERT_FILE": str(pki["ca"]),
    }
    gw = start_gateway(tmp_path, models, env=env)
    try:
        before = len(proxy.seen)
        for model in ("env-http", "env-https", "env-https-direct"):
            assert _ask(gw, model).status_code == 200, model
        seen = proxy.seen[before:]
        assert ("POST", plain_upstream.base_url("ok") + "/chat/completions") in seen
        assert ("CONNECT", f"127.0.0.1:{tls_upstream.port}") in seen
        assert not [s for s in seen if "localhost" in s[1]]  # NO_PROXY: direct
    finally:
        gw.stop()


@pytest.mark.parametrize(
    ("url", "env", "expected"),
    [
        ("https://api.openai.com/v1", {"HTTPS_PROXY": "http://p:3128"}, "http://p:3128"),
        (
            "https://api.openai.com/v1",
            {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:1"},
            "http://low:1",
        ),
        ("http://vllm.internal:8000/v1", {"HTTPS_PROXY": "http://p:3128"}, None),
        (
            "https://api.openai.com/v1",
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".openai.com"},
            None,
        ),
        ("https://api.openai.com/v1", {"HTTPS_PROXY": "http://p:1", "no_proxy": "*"}, None),
        (
            "https://api.anthropic.com",
            {"ALL_PROXY": "http://p:1", "NO_PROXY": "openai.com"},
            "http://p:1",
        ),
    ],
)
def test_proxy_for(url: str, env: dict[str, str], expected: str | None) -> None:
    assert proxy_for(url, env) == expected


REQUEST = ChatRequest(model="m", messages=(Message("user", (TextPart("hi"),)),))


def _model(base_url: str, **kw: Any) -> ModelConfig:
    return ModelConfig(name="m", provider="openai", upstream_model="m", base_url=base_url, **kw)


async def test_tls_contexts_are_built_once_at_startup(
    pki: dict[str, Path], tls_upstream: HostileUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``prepare``, new HTTPS connections (keep-alive off) build no TLS context."""
    model = _model(tls_upstream.base_url("ok", "localhost"), ca_file=str(pki["ca"]))
    connections = Connections({})
    connections.prepare([model])

    def refuse(*args: object, **kwargs: object) -> ssl.SSLContext:
        raise AssertionError("a TLS context was built after startup")

    monkeypatch.setattr(ssl, "create_default_context", refuse)
    http = UpstreamHttp(connections, keepalive_s=0)
    accepted = tls_upstream.accepted
    try:
        adapter = OpenAIUpstream(http, {})
        for _ in range(3):
            assert (await adapter.complete(REQUEST, model)).content == "echo: hi"
    finally:
        await http.aclose()
    assert tls_upstream.accepted >= accepted + 2  # new connections, no new context


async def test_tls_files_are_read_once_at_startup(
    pki: dict[str, Path], tls_upstream: HostileUpstream, tmp_path: Path
) -> None:
    """After ``prepare`` the CA file may go: new HTTPS connections (keep-alive off) use
    the certificates read at startup."""
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(pki["ca"].read_bytes())
    model = _model(tls_upstream.base_url("ok", "localhost"), ca_file=str(ca_file))
    connections = Connections({})
    connections.prepare([model])
    ca_file.unlink()
    http = UpstreamHttp(connections, keepalive_s=0)
    accepted = tls_upstream.accepted
    try:
        adapter = OpenAIUpstream(http, {})
        for _ in range(3):
            assert (await adapter.complete(REQUEST, model)).content == "echo: hi"
    finally:
        await http.aclose()
    assert tls_upstream.accepted >= accepted + 2  # new connections, no file read


@pytest.mark.parametrize(("keepalive_s", "reused"), [(30.0, True), (0.2, False)])
async def test_idle_connections_follow_upstream_keepalive_s(
    keepalive_s: float, reused: bool
) -> None:
    with HostileUpstream() as upstream:
        model = _model(upstream.base_url("ok"))
        http = UpstreamHttp(Connections({}), keepalive_s=keepalive_s)
        adapter = OpenAIUpstream(http, {})
        try:
            await adapter.complete(REQUEST, model)
            # Past the short keep-alive (the server sees the close), or a second of idling.
            closed = await asyncio.to_thread(
                wait_until, lambda: not upstream.open_connections(), 1.0
            )
            await adapter.complete(REQUEST, model)
        finally:
            await http.aclose()
        assert closed is not reused
        assert (upstream.accepted == 1) is reused
