"""What a key's operator-set fields may hold: one rule for the admin API and the CLI.

The bounds are the storage columns' (``migrations/0001_initial.sql``), so a value is
refused with a clear message before any database sees it, and both backends accept
exactly the same keys (SQLite would store an ``rpm`` that PostgreSQL's ``INTEGER`` refuses).

Example::

    try:
        rpm = checked_limit(body["rpm"])   # the int, or ValueError saying why not
    except ValueError as exc:
        raise InvalidRequest(f"rpm {exc}.", param="rpm") from exc
"""

from __future__ import annotations

import re

MAX_NAME_CHARS = 200
# api_keys.rpm / api_keys.tpm are INTEGER: 32-bit signed on PostgreSQL.
MAX_LIMIT = 2**31 - 1
# Control characters: PostgreSQL TEXT cannot hold NUL, and the others would reach an
# operator's terminal through `syntic keys list`.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def checked_limit(value: object) -> int:
    """``value`` as a per-key limit (``rpm``, ``tpm``): an integer (not a bool, not a
    float) from 1 to ``MAX_LIMIT``; otherwise ``ValueError`` saying what it must be."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"must be an integer from 1 to {MAX_LIMIT}")
    return value


def checked_name(value: object) -> str:
    """``value`` as a key's name, stripped: a string with something besides spaces, at
    most ``MAX_NAME_CHARS`` characters, no control characters; otherwise ``ValueError``."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
        raise ValueError(f"must be a non-empty string of at most {MAX_NAME_CHARS} characters")
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value.strip()
