"""What the HTTP layer needs from the key store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. Never carries the secret."""

    key_id: str
    name: str
    rpm: int | None = None
    tpm: int | None = None
    admin: bool = False
    # Upstream calls this key may have in flight at once (None: the server's default).
    max_concurrent: int | None = None


class KeyStore(Protocol):
    def cached(self, secret: str) -> tuple[bool, Principal | None]:
        """``(True, what authenticate would return)`` when that is known without waiting
        (cached, or malformed), else ``(False, None)``."""
        ...

    async def authenticate(self, secret: str) -> Principal | None:
        """The principal for a presented key, or None (unknown, malformed or revoked).
        Cached in process for a short TTL; revocation is seen within that TTL."""
        ...
