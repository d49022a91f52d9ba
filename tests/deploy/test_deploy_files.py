"""deploy/ checked against the code, as far as a machine without a container engine can.

Valid YAML; the commands and flags in the image, compose file and manifests exist in
``syntic``'s real parser; every ``SYNTIC_*`` variable is one the gateway reads; ports,
names and selectors agree; probes point at routes the app serves; nginx's caps match the
settings; the entrypoint runs migrate then serve.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.cli import build_parser
from gateway.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
IMAGE = "syntic-gateway:0.1.0"
PORT = 8080


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _k8s(kind: str) -> dict[str, Any]:
    found = [d for p in sorted(K8S.glob("*.yaml")) if (d := _yaml(p)) and d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind} in deploy/k8s, found {len(found)}"
    doc: dict[str, Any] = found[0]
    return doc


def _compose() -> dict[str, Any]:
    doc: dict[str, Any] = _yaml(DEPLOY / "docker-compose.yml")
    return doc


def _gateways() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    return {n: s for n, s in services.items() if n.startswith("gateway")}


def _dockerfile_json(instruction: str) -> list[str]:
    text = (DEPLOY / "Dockerfile").read_text()
    match = re.search(rf"^{instruction}\s+(\[.*\])\s*$", text, re.MULTILINE)
    assert match, f"Dockerfile has no exec-form {instruction}"
    value: list[str] = yaml.safe_load(match.group(1))
    return value


def _known_env_names() -> set[str]:
    """Every SYNTIC_* name the code (or the entrypoint) actually reads."""
    names: set[str] = set()
    for path in [*(ROOT / "gateway").rglob("*.py"), DEPLOY / "docker-entrypoint.sh"]:
        names.update(re.findall(r"\bSYNTIC_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    return names


def _serve_parses(args: list[str]) -> None:
    parsed = build_parser().parse_args(["serve", *args])
    assert parsed.command == "serve"
    if "--port" in args:
        assert int(parsed.port) == PORT
    if "--host" in args:
        assert parsed.host == "0.0.0.0"


def _configmap_settings(tmp_path: Path) -> Settings:
    path = tmp_path / "syntic.toml"
    path.write_text(_k8s("ConfigMap")["data"]["syntic.toml"])
    return load_settings(path, env={})


# --- files parse ---------------------------------------------------------------------------


def test_every_yaml_file_parses_and_kustomization_lists_them_all() -> None:
    files = sorted(K8S.glob("*.yaml"))
    for path in [DEPLOY / "docker-compose.yml", *files]:
        assert _yaml(path), f"{path} is empty"
    listed = set(_yaml(K8S / "kustomization.yaml")["resources"])
    assert listed == {p.name for p in files} - {"kustomization.yaml"}


def test_configs_load_with_the_real_settings_loader(tmp_path: Path) -> None:
    for settings in (
        load_settings(DEPLOY / "syntic.toml", env={}),
        _configmap_settings(tmp_path),
    ):
        assert settings.models, "a config with no model is never ready"
        assert settings.port == PORT
        assert settings.host == "0.0.0.0"  # reachable from outside the container
        assert settings.max_body_bytes == 4 * 1024 * 1024


# --- commands exist in the real CLI ---------------------------------------------------------


def test_image_entrypoint_and_cmd() -> None:
    assert _dockerfile_json("ENTRYPOINT") == ["docker-entrypoint.sh"]
    _serve_parses(_dockerfile_json("CMD"))
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(rf"^EXPOSE {PORT}$", text, re.MULTILINE)
    assert "/readyz" in text  # HEALTHCHECK


def test_compose_and_k8s_commands_parse() -> None:
    for name, svc in _gateways().items():
        assert svc["image"] == IMAGE, name
        _serve_parses(svc["command"])
    migrate = _compose()["services"]["migrate"]
    assert migrate["entrypoint"] == ["syntic"]
    assert build_parser().parse_args(migrate["command"]).command == "migrate"

    (container,) = _k8s("Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    _serve_parses(container["args"])
    (job,) = _k8s("Job")["spec"]["template"]["spec"]["containers"]
    assert job["image"] == IMAGE
    assert build_parser().parse_args([*job["command"][1:], *job["args"]]).command == "migrate"
    assert job["command"][0] == "syntic"


def test_image_copies_files_that_exist_and_installs_what_pyproject_needs() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    copies = re.findall(r"^COPY (?!--from)(.+)$", text, re.MULTILINE)
    assert copies
    for line in copies:
        *sources, _dest = line.split()
        for src in sources:
            assert (ROOT / src).exists(), f"Dockerfile copies {src}, which is not in the repo"
    copied = {src.rstrip("/") for line in copies for src in line.split()[:-1]}
    # the build stage needs every package pyproject ships, and the readme it names
    assert {"pyproject.toml", "README.md", "gateway", "validator"} <= copied


@pytest.mark.parametrize(
    ("migrate_on_start", "expected"),
    [
        (None, ["migrate", "serve --host 0.0.0.0 --port 8080"]),
        ("1", ["migrate", "serve --host 0.0.0.0 --port 8080"]),
        ("0", ["serve --host 0.0.0.0 --port 8080"]),
    ],
)
def test_entrypoint_migrates_then_serves(
    tmp_path: Path, migrate_on_start: str | None, expected: list[str]
) -> None:
    calls = tmp_path / "calls"
    fake = tmp_path / "syntic"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(calls))}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    if migrate_on_start is not None:
        env["SYNTIC_MIGRATE_ON_START"] = migrate_on_start
    subprocess.run(
        ["sh", str(DEPLOY / "docker-entrypoint.sh"), "--host", "0.0.0.0", "--port", "8080"],
        env=env,
        check=True,
        timeout=10,
    )
    assert calls.read_text().splitlines() == expected


def test_entrypoint_stops_when_migration_fails(tmp_path: Path) -> None:
    fake = tmp_path / "syntic"
    fake.write_text('#!/bin/sh\n[ "$1" = migrate ] && exit 3\necho served\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    done = subprocess.run(
        ["sh", str(DEPLOY / "docker-entrypoint.sh")],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 3
    assert "served" not in done.stdout
    assert os.access(DEPLOY / "docker-entrypoint.sh", os.X_OK)


# --- environment names ----------------------------------------------------------------------


def _env_names_used() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for name, svc in _compose()["services"].items():
        used[f"compose:{name}"] = {k for k in svc.get("environment", {}) if k.startswith("SYNTIC")}
    for kind in ("Deployment", "Job"):
        (c,) = _k8s(kind)["spec"]["template"]["spec"]["containers"]
        used[kind] = {e["name"] for e in c.get("env", [])}
    used["Secret"] = set(_k8s("Secret")["stringData"])
    used["Dockerfile"] = set(re.findall(r"\bSYNTIC_[A-Z_]+", (DEPLOY / "Dockerfile").read_text()))
    example = (DEPLOY / "syntic.env.example").read_text()
    # documented settings, commented out when they are optional ("# NAME=value")
    used["env.example"] = set(re.findall(r"^(?:#\s*)?([A-Z][A-Z0-9_]*)=", example, re.MULTILINE))
    return used


def test_every_syntic_variable_is_one_the_gateway_reads() -> None:
    known = _known_env_names()
    assert {"SYNTIC_CONFIG", "SYNTIC_DATABASE_URL", "SYNTIC_REDIS_URL"} <= known
    for where, names in _env_names_used().items():
        unknown = {n for n in names if n.startswith("SYNTIC_")} - known
        assert not unknown, f"{where} sets variables nothing reads: {sorted(unknown)}"


def test_secrets_hold_the_secrets_and_upstream_keys_are_provided(tmp_path: Path) -> None:
    secret = set(_k8s("Secret")["stringData"])
    assert {"SYNTIC_KEY_SECRET", "SYNTIC_DATABASE_URL"} <= secret
    example = _env_names_used()["env.example"]
    for settings in (load_settings(DEPLOY / "syntic.toml", env={}), _configmap_settings(tmp_path)):
        for model in settings.models:
            if model.api_key_env:
                assert model.api_key_env in secret
                assert model.api_key_env in example
    # config files carry no secrets: those come from the environment
    for text in ((DEPLOY / "syntic.toml").read_text(), _k8s("ConfigMap")["data"]["syntic.toml"]):
        assert "key_hash_secret" not in text
        assert "database_url" not in text


def test_env_example_documents_every_variable_the_gateway_reads() -> None:
    example = _env_names_used()["env.example"]
    missing = {n for n in _known_env_names() if n not in example}
    assert not missing, f"syntic.env.example does not document {sorted(missing)}"


# --- topology -------------------------------------------------------------------------------


def test_compose_fleet_shares_one_postgres_and_one_redis() -> None:
    services = _compose()["services"]
    gateways = _gateways()
    assert len(gateways) == 3
    pg = services["postgres"]["environment"]
    want_db = (
        f"postgresql://{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/"
        f"{pg['POSTGRES_DB']}"
    )
    urls = {
        (s["environment"]["SYNTIC_DATABASE_URL"], s["environment"]["SYNTIC_REDIS_URL"])
        for s in gateways.values()
    }
    assert urls == {(want_db, "redis://redis:6379/0")}
    assert services["migrate"]["environment"]["SYNTIC_DATABASE_URL"] == want_db
    for svc in gateways.values():
        assert svc["environment"]["SYNTIC_MIGRATE_ON_START"] == "0"
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert "/readyz" in " ".join(svc["healthcheck"]["test"])
        assert str(PORT) in " ".join(svc["healthcheck"]["test"])
    assert set(services["nginx"]["depends_on"]) == set(gateways)


def _nginx() -> str:
    return (DEPLOY / "nginx.conf").read_text()


def _directive(name: str) -> list[str]:
    return re.findall(rf"^\s*{name}\s+([^;{{\n]+);", _nginx(), re.MULTILINE)


def test_nginx_matches_the_fleet_and_the_settings() -> None:
    text = _nginx()
    assert text.count("{") == text.count("}")
    servers = {s.split()[0] for s in _directive("server")}
    assert servers == {f"{name}:{PORT}" for name in _gateways()}
    (body,) = _directive("client_max_body_size")
    settings = load_settings(DEPLOY / "syntic.toml", env={})
    assert body == "4m"
    assert settings.max_body_bytes == 4 * 1024 * 1024
    (read_timeout,) = _directive("proxy_read_timeout")
    assert int(read_timeout.rstrip("s")) > settings.request_timeout_s
    assert _directive("proxy_buffering") == ["off"]  # SSE
    assert _directive("proxy_http_version") == ["1.1"]
    assert _directive("keepalive")
    assert re.search(r"location = /metrics\s*\{\s*return 404;", text)


def _named_location(name: str) -> str:
    match = re.search(rf"location @{name}\s*\{{(.*?)\n\s*\}}", _nginx(), re.DOTALL)
    assert match, f"no location @{name}"
    return match.group(1)


def test_nginx_returns_a_restarted_replica_at_once_and_speaks_json() -> None:
    servers = _directive("server")
    assert servers
    for params in servers:
        fields = dict(p.split("=", 1) for p in params.split()[1:])
        assert int(fields["fail_timeout"].rstrip("s")) <= 2, params
    for status in ("502", "503", "504", "429"):
        (target,) = [t for t in _directive("error_page") if t.split()[0] == status]
        body = _named_location(target.split()[1].lstrip("@"))
        (ret,) = re.findall(r"return (\d+) '(.*)';", body)
        assert ret[0] == status
        envelope = json.loads(ret[1].replace("\\n", "").replace("$request_id", "abc"))
        assert set(envelope["error"]) == {"type", "code", "message", "param"}
        assert envelope["request_id"] == "nginx_abc" and envelope["type"] == "error"
        assert "default_type application/json;" in body


def test_k8s_names_selectors_and_probes_agree() -> None:
    deployment = _k8s("Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert _k8s("Service")["spec"]["selector"].items() <= pod_labels.items()
    pdb = _k8s("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    target = _k8s("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])

    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": PORT}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["readinessProbe"]["periodSeconds"] <= 2  # a restarted pod is back fast
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert _k8s("Service")["spec"]["ports"][0]["targetPort"] == "http"

    config = _k8s("ConfigMap")["metadata"]["name"]
    secret = _k8s("Secret")["metadata"]["name"]
    for workload in (spec, _k8s("Job")["spec"]["template"]["spec"]):
        assert {v["configMap"]["name"] for v in workload["volumes"] if "configMap" in v} == {config}
        (c,) = workload["containers"]
        assert [e["secretRef"]["name"] for e in c["envFrom"]] == [secret]
        mount = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        config_env = {e["name"]: e.get("value") for e in c["env"]}["SYNTIC_CONFIG"]
        volume = next(v["name"] for v in workload["volumes"] if "configMap" in v)
        assert config_env == f"{mount[volume]}/syntic.toml"


def test_probes_point_at_routes_the_app_serves() -> None:
    from starlette.routing import Route

    from gateway.app import create_app

    app = create_app(load_settings(DEPLOY / "syntic.toml", env={}))
    gets = {r.path for r in app.routes if isinstance(r, Route) and "GET" in (r.methods or ())}
    (container,) = _k8s("Deployment")["spec"]["template"]["spec"]["containers"]
    probes = {container[p]["httpGet"]["path"] for p in ("readinessProbe", "livenessProbe")}
    healthchecks = (
        " ".join(" ".join(s["healthcheck"]["test"]) for s in _gateways().values())
        + (DEPLOY / "Dockerfile").read_text()
    )
    probes |= set(re.findall(r"127\.0\.0\.1:8080(/[a-z]+)", healthchecks))
    assert probes == {"/readyz", "/healthz"}
    assert probes <= gets
    annotations = _k8s("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] in gets
