"""Key format: kinds, entropy, checksum, keyed hash, display prefix."""

from __future__ import annotations

import pytest

from gateway.keys.secrets import (
    BODY_LEN,
    CHECKSUM_LEN,
    KINDS,
    KeyKind,
    display_prefix,
    generate_key,
    hash_key,
    parse_key,
)


@pytest.mark.parametrize("kind", KINDS)
def test_generated_keys_parse_as_their_kind(kind: KeyKind) -> None:
    key = generate_key(kind)
    assert key.startswith(f"sk_{kind}_")
    assert len(key) == len(f"sk_{kind}_") + BODY_LEN + CHECKSUM_LEN
    assert parse_key(key) == kind


def test_keys_are_unique() -> None:
    keys = {generate_key("live") for _ in range(2000)}
    assert len(keys) == 2000


def _flip(key: str, i: int) -> str:
    ch = key[i]
    return key[:i] + ("A" if ch != "A" else "B") + key[i + 1 :]


GOOD = generate_key("live")


@pytest.mark.parametrize(
    "candidate",
    [
        "",
        "sk_live_",
        "Bearer " + GOOD,
        GOOD + "x",
        GOOD[:-1],
        GOOD.replace("sk_live_", "sk_prod_"),
        GOOD.replace("sk_live_", "pk_live_"),
        GOOD[:20] + "-" + GOOD[21:],
        GOOD[:20] + "é" + GOOD[21:],
        _flip(GOOD, 10),  # body typo: checksum no longer matches
        _flip(GOOD, len(GOOD) - 1),  # checksum typo
        GOOD.replace("sk_live_", "sk_test_"),  # the checksum covers the kind too
        "sk_live_" + "A" * 5000,
    ],
)
def test_malformed_keys_are_rejected_without_io(candidate: str) -> None:
    assert parse_key(candidate) is None


def test_hash_is_keyed_by_server_secret() -> None:
    key = generate_key("live")
    assert hash_key(key, "a") == hash_key(key, "a")
    assert hash_key(key, "a") != hash_key(key, "b")
    assert key not in hash_key(key, "a")
    assert len(hash_key(key, "a")) == 64


@pytest.mark.parametrize(("kind", "length"), [("live", 12), ("test", 12), ("admin", 13)])
def test_display_prefix_is_short(kind: KeyKind, length: int) -> None:
    key = generate_key(kind)
    prefix = display_prefix(key)
    assert key.startswith(prefix)
    assert len(prefix) == length
