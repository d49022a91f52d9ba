"""``syntic keys create | list | revoke`` end to end on a real database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.keys.store import DbKeyStore
from gateway.storage import open_database

PEPPER = "cli-test-pepper"


def syntic(db_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SYNTIC_DATABASE_URL": db_url, "SYNTIC_KEY_SECRET": PEPPER}
    env.pop("SYNTIC_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _auth(db_url: str, secret: str) -> tuple[str, int | None, bool] | None:
    db = open_database(db_url)
    try:
        p = await DbKeyStore(db, PEPPER).authenticate(secret)
        return None if p is None else (p.name, p.rpm, p.admin)
    finally:
        await db.aclose()


@pytest.mark.parametrize(
    ("flags", "prefix", "expected"),
    [
        (["--rpm", "30", "--tpm", "9000"], "sk_live_", 30),
        (["--test"], "sk_test_", None),
        (["--admin"], "sk_admin_", None),
    ],
)
def test_create_list_revoke(
    db_url: str, tmp_path: Path, flags: list[str], prefix: str, expected: int | None
) -> None:
    name = f"cli-{prefix}{os.getpid()}"
    created = syntic(db_url, tmp_path, "keys", "create", "--name", name, *flags)
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip().splitlines()[-1]
    assert secret.startswith(prefix)
    auth = asyncio.run(_auth(db_url, secret))
    assert auth == (name, expected, prefix == "sk_admin_")

    listed = syntic(db_url, tmp_path, "keys", "list")
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.endswith(name))
    assert secret not in listed.stdout
    assert secret[len(prefix) + 8 :] not in listed.stdout
    key_id = line.split()[0]
    assert "active" in line

    revoked = syntic(db_url, tmp_path, "keys", "revoke", key_id)
    assert revoked.returncode == 0, revoked.stderr
    assert asyncio.run(_auth(db_url, secret)) is None
    again = syntic(db_url, tmp_path, "keys", "revoke", key_id)
    assert again.returncode == 1
    assert "already revoked" in again.stdout
    listed = syntic(db_url, tmp_path, "keys", "list", "--active")
    assert name not in listed.stdout


def test_revoke_unknown_and_bad_limits(db_url: str, tmp_path: Path) -> None:
    missing = syntic(db_url, tmp_path, "keys", "revoke", "key_0000000000000000")
    assert missing.returncode == 1 and "no key" in missing.stdout
    bad = syntic(db_url, tmp_path, "keys", "create", "--name", "x", "--rpm", "0")
    assert bad.returncode == 2


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--rpm", "2147483648"),  # over PostgreSQL's INTEGER (SQLite would keep it)
        ("--tpm", "9223372036854775808"),  # over SQLite's 64-bit INTEGER
        ("--rpm", "-1"),
        ("--tpm", "1.5"),
        ("--rpm", "1e3"),
        ("--name", "  "),
        ("--name", "a\x1b[31mred"),
    ],
)
def test_a_value_the_column_cannot_hold_is_a_usage_error(
    db_url: str, tmp_path: Path, flag: str, value: str
) -> None:
    args = ["--name", "bounds", flag, value] if flag != "--name" else [flag, value]
    out = syntic(db_url, tmp_path, "keys", "create", *args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"syntic keys create: error: argument {flag}: must ")
    assert "sk_" not in out.stdout  # no key was made
    listed = syntic(db_url, tmp_path, "keys", "list")
    assert "bounds" not in listed.stdout


def test_the_largest_limit_the_column_holds_is_kept(db_url: str, tmp_path: Path) -> None:
    out = syntic(db_url, tmp_path, "keys", "create", "--name", "widest", "--rpm", "2147483647")
    assert out.returncode == 0, out.stderr
    assert "rpm=2147483647" in out.stdout
    secret = out.stdout.strip().splitlines()[-1]
    assert asyncio.run(_auth(db_url, secret)) == ("widest", 2147483647, False)


def test_unreachable_database_is_a_clean_error(tmp_path: Path) -> None:
    out = syntic("postgresql://postgres@127.0.0.1:1/nope", tmp_path, "keys", "list")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("syntic keys list: ")
