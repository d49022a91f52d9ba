"""Scrub credentials from upstream-provided text before it reaches clients or logs.

Upstreams echo credentials in their error messages ("Incorrect API key provided:
sk-..."); the gateway quotes those messages in its own errors, so every adapter passes
them through ``scrub`` first.

Example::

    scrub("Incorrect API key provided: sk-proj-abcdefghijklmnop", secret=None)
    # 'Incorrect API key provided: [REDACTED]'
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"
_CREDENTIAL_RE = re.compile(r"\b(?:sk|rk|pk|key)[-_][A-Za-z0-9_\-]{12,}|(?i:bearer)\s+\S+")


def scrub(text: str, secret: str | None = None) -> str:
    """``text`` without ``secret`` or anything shaped like an API key or bearer token."""
    if secret:
        text = text.replace(secret, MASK)
    return _CREDENTIAL_RE.sub(MASK, text)
