"""First-start dev key, the no-config default catalogue, and ``syntic models list``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import openai

from gateway.app import create_app
from gateway.keys.devkey import ensure_dev_key_async
from gateway.keys.store import DbKeyStore
from gateway.settings import Settings, load_settings
from gateway.storage import open_database
from tests.support.gateway_proc import InProcessGateway

ROOT = Path(__file__).resolve().parents[2]


async def test_dev_key_created_once_and_authenticates(tmp_path: Path) -> None:
    settings = Settings(models=(), database_url=f"sqlite:///{tmp_path / 'dev.db'}")
    secret = await ensure_dev_key_async(settings)
    assert secret is not None and secret.startswith("sk_live_")
    assert await ensure_dev_key_async(settings) is None  # a key exists now: nothing printed
    db = open_database(settings.database_url)
    try:
        store = DbKeyStore(db, settings.key_hash_secret)
        principal = await store.authenticate(secret)
        assert principal is not None and principal.name == "dev"
        assert [k.name for k in await store.list()] == ["dev"]
    finally:
        await db.aclose()


def test_no_config_serves_the_local_model_in_both_modes() -> None:
    settings = load_settings(None, env={})
    rows = [
        (m.name, m.provider, m.local_model, m.constrained, m.constrained_correction)
        for m in settings.models
    ]
    # The first name is the grammar-constrained one; every correction runs under the grammar.
    assert rows == [
        ("qwen2.5-0.5b", "local", "qwen2.5-0.5b", True, True),
        ("qwen2.5-0.5b-free", "local", "qwen2.5-0.5b", False, True),
        ("qwen2.5-0.5b-constrained", "local", "qwen2.5-0.5b", True, True),
    ]


def test_models_endpoint_lists_the_grammar_model_first(tmp_path: Path) -> None:
    env = {**os.environ, "SYNTIC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}
    env.pop("SYNTIC_CONFIG", None)
    cli = [sys.executable, "-m", "gateway"]
    subprocess.run([*cli, "migrate"], env=env, cwd=ROOT, check=True, capture_output=True)
    out = subprocess.run(
        [*cli, "keys", "create", "--name", "t"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    key = out.stdout.strip().splitlines()[-1]
    with (
        InProcessGateway(create_app(load_settings(None, env))) as gw,
        openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client,
    ):
        models = list(client.models.list())
    assert [m.id for m in models] == [
        "qwen2.5-0.5b",
        "qwen2.5-0.5b-free",
        "qwen2.5-0.5b-constrained",
    ]
    constrained = [(m.model_extra or {})["capabilities"]["constrained"] for m in models]
    assert constrained == [True, False, True]


def test_config_file_replaces_the_default(tmp_path: Path) -> None:
    config = tmp_path / "g.toml"
    config.write_text('[[models]]\nname = "x"\nprovider = "openai"\n')
    assert [m.name for m in load_settings(config, env={}).models] == ["x"]


def test_models_list_command(tmp_path: Path) -> None:
    (tmp_path / "smollm2-135m-instruct-q4_1.gguf").write_bytes(b"not the real file")
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "models", "list"],
        env={"SYNTIC_MODELS_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert set(rows) == {"qwen2.5-0.5b", "smollm2-135m"}
    assert "not installed" in rows["qwen2.5-0.5b"]
    assert "not installed" in rows["smollm2-135m"]  # wrong size: not trusted
    assert str(tmp_path) in rows["qwen2.5-0.5b"]
