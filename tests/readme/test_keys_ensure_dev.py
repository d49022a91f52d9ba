"""``syntic keys ensure-dev``, the dev-key step of ``scripts/run``: a ``dev`` key only when
the database has no active key, printed once on the last line; otherwise how to make one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.keys.store import DbKeyStore
from gateway.storage import open_database
from gateway.storage.migrate import apply_migrations

ROOT = Path(__file__).resolve().parents[2]
PEPPER = "ensure-dev-pepper"


def _ensure_dev(db_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    env.update(SYNTIC_DATABASE_URL=db_url, SYNTIC_KEY_SECRET=PEPPER, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "gateway", "keys", "ensure-dev"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _prepare(db_url: str, existing: str) -> None:
    db = open_database(db_url)
    try:
        await apply_migrations(db)
        store = DbKeyStore(db, PEPPER)
        if existing in ("active", "revoked", "admin"):
            created = await store.create("someone", kind="admin" if existing == "admin" else "live")
            if existing == "revoked":
                await store.revoke(created.info.id)
    finally:
        await db.aclose()


async def _names(db_url: str, secret: str | None) -> tuple[list[str], str | None]:
    db = open_database(db_url)
    try:
        store = DbKeyStore(db, PEPPER)
        active = [k.name for k in await store.list(include_revoked=False)]
        principal = await store.authenticate(secret) if secret else None
        return active, None if principal is None else principal.name
    finally:
        await db.aclose()


@pytest.mark.parametrize(
    ("existing", "creates"),
    [
        ("none", True),
        ("revoked", True),  # a revoked key is no key
        ("active", False),
        ("admin", False),  # any active key counts
    ],
)
def test_ensure_dev_creates_a_key_only_when_none_is_active(
    tmp_path: Path, existing: str, creates: bool
) -> None:
    db_url = f"sqlite:///{tmp_path / 'keys.db'}"
    asyncio.run(_prepare(db_url, existing))
    done = _ensure_dev(db_url, tmp_path)
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    if creates:
        assert last.startswith("sk_live_")
        active, name = asyncio.run(_names(db_url, last))
        assert name == "dev" and "dev" in active
        again = _ensure_dev(db_url, tmp_path)  # idempotent: nothing new, nothing printed
        assert again.returncode == 0 and "sk_live_" not in again.stdout
        assert asyncio.run(_names(db_url, None))[0] == active
    else:
        assert "sk_" not in done.stdout
        assert "syntic keys create --name NAME" in done.stdout
        assert "dev" not in asyncio.run(_names(db_url, None))[0]


def test_ensure_dev_on_an_unmigrated_database_fails_cleanly(tmp_path: Path) -> None:
    done = _ensure_dev(f"sqlite:///{tmp_path / 'empty.db'}", tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("syntic keys ensure-dev:")
    assert "Traceback" not in done.stderr
