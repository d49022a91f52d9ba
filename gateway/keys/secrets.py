"""API key format: ``sk_<kind>_<body><checksum>``, shown once, stored only as a keyed hash.

* ``kind`` is ``live``, ``test`` or ``admin`` (admin keys only open ``/admin/*``).
* ``body`` is 43 base62 characters from ``secrets`` (~256 bits).
* ``checksum`` is 6 base62 characters of CRC32 over ``sk_<kind>_<body>``, so a mistyped
  or made-up key is rejected without touching the database.

The database stores ``HMAC-SHA256(server secret, key)`` and a short display prefix
(``sk_live_AbCd``) for listings; never the key.

>>> key = generate_key("live")
>>> parse_key(key) == "live"
True
"""

from __future__ import annotations

import hmac
import secrets
import zlib
from typing import Literal

KeyKind = Literal["live", "test", "admin"]
KINDS: tuple[KeyKind, ...] = ("live", "test", "admin")

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ALPHABET_SET = frozenset(_ALPHABET)
BODY_LEN = 43
CHECKSUM_LEN = 6
DISPLAY_CHARS = 4


def _base62(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 62)
        out.append(_ALPHABET[r])
    return "".join(reversed(out))


def _checksum(head: str) -> str:
    return _base62(zlib.crc32(head.encode("ascii")), CHECKSUM_LEN)


def generate_key(kind: KeyKind) -> str:
    """A fresh key of this kind; the only time the full key exists."""
    body = "".join(secrets.choice(_ALPHABET) for _ in range(BODY_LEN))
    head = f"sk_{kind}_{body}"
    return head + _checksum(head)


def parse_key(key: str) -> KeyKind | None:
    """The key's kind if it is well formed with a valid checksum, else None. No I/O."""
    if not isinstance(key, str) or len(key) > 64:
        return None
    for kind in KINDS:
        prefix = f"sk_{kind}_"
        if key.startswith(prefix):
            rest = key[len(prefix) :]
            if len(rest) != BODY_LEN + CHECKSUM_LEN or not _ALPHABET_SET.issuperset(rest):
                return None
            head, check = key[:-CHECKSUM_LEN], key[-CHECKSUM_LEN:]
            return kind if hmac.compare_digest(_checksum(head), check) else None
    return None


def hash_key(key: str, server_secret: str) -> str:
    """The stored form: hex HMAC-SHA256 keyed with the server secret."""
    # hmac.digest: the same HMAC in one C call, no HMAC object per request.
    return hmac.digest(server_secret.encode(), key.encode(), "sha256").hex()


def display_prefix(key: str) -> str:
    """Enough to recognise a key in a listing (``sk_live_AbCd``), useless to an attacker."""
    kind_end = key.index("_", 3) + 1
    return key[: kind_end + DISPLAY_CHARS]
