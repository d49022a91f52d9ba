"""The key store: create, list, revoke, and authenticate with an in-process TTL cache.

Authentication path:

1. ``parse_key`` rejects malformed keys and bad checksums with no database hit.
2. The key is reduced to its HMAC at once; the cache and the database only see the HMAC.
3. A cached answer (positive or negative) younger than ``ttl_s`` is returned as is, so a
   revocation is seen by every replica within ``ttl_s`` (default 2 s).
4. Otherwise one query (concurrent lookups of the same key share it); the stored hash is
   compared with ``hmac.compare_digest``.
5. Database down: a key that authenticated within ``stale_grace_s`` keeps working; a key
   known to be bad stays refused (``None`` -> 401); any other key gets
   ``Overloaded(code="key_store_unavailable")`` (503 + retry-after), because answering
   401 would tell a paying customer their valid key is wrong.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import blake2s

from gateway.errors import Overloaded
from gateway.keys.base import Principal
from gateway.keys.secrets import KeyKind, display_prefix, generate_key, hash_key, parse_key
from gateway.storage.base import Database, StorageError, StorageUnavailable

log = logging.getLogger("syntic.keys")


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """A key as listed: everything but the secret."""

    id: str
    name: str
    kind: KeyKind
    display_prefix: str
    rpm: int | None
    tpm: int | None
    admin: bool
    created_at: float
    revoked_at: float | None
    max_concurrent: int | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


@dataclass(frozen=True, slots=True)
class CreatedKey:
    """A new key: ``secret`` is shown once and never stored."""

    info: KeyInfo
    secret: str


@dataclass(frozen=True, slots=True)
class _Entry:
    principal: Principal | None
    fetched_at: float


_COLUMNS = "id, name, kind, display_prefix, rpm, tpm, admin, created_at, revoked_at, max_concurrent"


def _info(row: tuple[object, ...]) -> KeyInfo:
    kid, name, kind, prefix, rpm, tpm, admin, created, revoked, concurrent = row
    return KeyInfo(
        id=str(kid),
        name=str(name),
        kind=kind if kind in ("live", "test", "admin") else "live",
        display_prefix=str(prefix),
        rpm=None if rpm is None else int(rpm),  # type: ignore[call-overload]
        tpm=None if tpm is None else int(tpm),  # type: ignore[call-overload]
        admin=bool(admin),
        created_at=float(created),  # type: ignore[arg-type]
        revoked_at=None if revoked is None else float(revoked),  # type: ignore[arg-type]
        max_concurrent=None if concurrent is None else int(concurrent),  # type: ignore[call-overload]
    )


class DbKeyStore:
    """Keys in the ``api_keys`` table; implements the ``KeyStore`` protocol."""

    def __init__(
        self,
        db: Database,
        server_secret: str,
        *,
        ttl_s: float = 2.0,
        negative_ttl_s: float | None = None,
        stale_grace_s: float = 300.0,
        lookup_timeout_s: float = 1.0,
        outage_retry_s: float = 1.0,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._secret = server_secret
        self.ttl_s = ttl_s
        self.negative_ttl_s = ttl_s if negative_ttl_s is None else negative_ttl_s
        self.stale_grace_s = stale_grace_s
        self.lookup_timeout_s = lookup_timeout_s
        self.outage_retry_s = outage_retry_s
        self._down_until: float | None = None
        self._max_entries = max_entries
        self._clock = clock
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        # Keyed once: each fingerprint copies this state (no key or argument parsing per call).
        self._fingerprint = blake2s(key=os.urandom(32), digest_size=16)
        self._digests: dict[bytes, tuple[str, KeyKind]] = {}
        self._inflight: dict[str, asyncio.Task[Principal | None]] = {}
        self.db_lookups = 0  # for metrics and tests: queries actually sent
        self._outage_logged = False

    # -- hot path -------------------------------------------------------------

    def cached(self, secret: str) -> tuple[bool, Principal | None]:
        """``(True, answer)`` when ``authenticate`` would answer from memory, without
        waiting (a key seen within the TTL, or a malformed one); ``(False, None)`` when it
        has to ask the database. Lets the auth middleware stay off the await chain."""
        known = self._digest(secret)
        if known is None:
            return True, None
        entry = self._cache.get(known[0])
        if entry is not None and self._fresh(entry):
            return True, entry.principal
        return False, None

    async def authenticate(self, secret: str) -> Principal | None:
        """The principal for a presented key, or None (malformed, unknown or revoked).

        Raises ``Overloaded`` only when the database is unreachable and this key has not
        been seen recently."""
        known = self._digest(secret)
        if known is None:
            return None
        digest, kind = known
        entry = self._cache.get(digest)
        if entry is not None and self._fresh(entry):
            return entry.principal
        # One query per key at a time, in its own task so a caller that disconnects
        # doesn't cancel the lookup other callers are waiting on.
        task = self._inflight.get(digest)
        if task is None:
            task = asyncio.create_task(self._lookup(digest, kind, entry))
            self._inflight[digest] = task
            task.add_done_callback(lambda t: self._lookup_done(digest, t))
        return await asyncio.shield(task)

    def _digest(self, secret: str) -> tuple[str, KeyKind] | None:
        """A well-formed key's stored-form digest (HMAC-SHA256) and kind; None if malformed.

        A key seen before is found by a keyed 128-bit BLAKE2s fingerprint (a few C calls)
        instead of the checksum parse and the HMAC on every request. The fingerprint key
        is random per process, so fingerprints mean nothing outside it; the raw key is
        never kept. BLAKE2s: a key is one short block, where BLAKE2b's blocks are twice
        as long and its rounds dearer."""
        hasher = self._fingerprint.copy()
        hasher.update(secret.encode())
        fingerprint = hasher.digest()
        known = self._digests.get(fingerprint)
        if known is None:
            kind = parse_key(secret)
            if kind is None:
                return None
            known = (hash_key(secret, self._secret), kind)
            if len(self._digests) >= self._max_entries:
                self._digests.clear()
            self._digests[fingerprint] = known
        return known

    def _fresh(self, entry: _Entry) -> bool:
        """Whether a cached answer is still within its TTL (negative answers have their own)."""
        ttl = self.ttl_s if entry.principal is not None else self.negative_ttl_s
        return self._clock() - entry.fetched_at < ttl

    def _lookup_done(self, digest: str, task: asyncio.Task[Principal | None]) -> None:
        self._inflight.pop(digest, None)
        if not task.cancelled():
            task.exception()  # retrieved here so an abandoned failure isn't logged as lost

    async def _lookup(self, digest: str, kind: KeyKind, stale: _Entry | None) -> Principal | None:
        if self._down_until is not None and self._clock() < self._down_until:
            # Known outage: don't make every request wait on a dead database.
            return self._during_outage(StorageUnavailable("database marked down"), stale)
        try:
            self.db_lookups += 1
            rows = await asyncio.wait_for(
                self._db.fetch(
                    "SELECT id, name, rpm, tpm, admin, secret_hash, kind, max_concurrent"
                    " FROM api_keys"
                    " WHERE secret_hash = ? AND revoked_at IS NULL",
                    (digest,),
                ),
                self.lookup_timeout_s,
            )
        except (StorageError, TimeoutError) as exc:
            self._down_until = self._clock() + self.outage_retry_s
            err = exc if isinstance(exc, StorageError) else StorageUnavailable("lookup timed out")
            return self._during_outage(err, stale)
        self._down_until = None
        if self._outage_logged:
            log.warning("key store: database reachable again")
            self._outage_logged = False
        principal: Principal | None = None
        for kid, name, rpm, tpm, admin, stored, row_kind, concurrent in rows:
            if hmac.compare_digest(str(stored), digest) and row_kind == kind:
                principal = Principal(
                    key_id=str(kid),
                    name=str(name),
                    rpm=None if rpm is None else int(rpm),
                    tpm=None if tpm is None else int(tpm),
                    admin=bool(admin),
                    max_concurrent=None if concurrent is None else int(concurrent),
                )
        self._remember(digest, principal)
        return principal

    def _during_outage(self, exc: StorageError, stale: _Entry | None) -> Principal | None:
        if not self._outage_logged:
            log.warning("key store: database unavailable, serving recently seen keys: %s", exc)
            self._outage_logged = True
        if stale is not None:
            if stale.principal is None:
                return None
            if self._clock() - stale.fetched_at < self.stale_grace_s:
                return stale.principal
        raise Overloaded(
            "The key store is temporarily unavailable; retry shortly.",
            code="key_store_unavailable",
            headers={"retry-after": "1"},
        ) from (exc if isinstance(exc, StorageUnavailable) else None)

    def _remember(self, digest: str, principal: Principal | None) -> None:
        self._cache[digest] = _Entry(principal, self._clock())
        self._cache.move_to_end(digest)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)

    def forget(self, key_id: str) -> None:
        """Drop this key from this process's cache (other replicas see it within the TTL)."""
        stale = [d for d, e in self._cache.items() if e.principal and e.principal.key_id == key_id]
        for digest in stale:
            del self._cache[digest]

    # -- management (CLI and admin API) -----------------------------------------

    async def create(
        self,
        name: str,
        *,
        kind: KeyKind = "live",
        rpm: int | None = None,
        tpm: int | None = None,
        max_concurrent: int | None = None,
    ) -> CreatedKey:
        """Create a key; the returned ``secret`` is the only copy."""
        secret = generate_key(kind)
        info = KeyInfo(
            id="key_" + secrets.token_hex(8),
            name=name,
            kind=kind,
            display_prefix=display_prefix(secret),
            rpm=rpm,
            tpm=tpm,
            admin=kind == "admin",
            created_at=time.time(),
            revoked_at=None,
            max_concurrent=max_concurrent,
        )
        await self._db.execute(
            f"INSERT INTO api_keys ({_COLUMNS}, secret_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                info.id,
                info.name,
                info.kind,
                info.display_prefix,
                info.rpm,
                info.tpm,
                info.admin,
                info.created_at,
                info.revoked_at,
                info.max_concurrent,
                hash_key(secret, self._secret),
            ),
        )
        return CreatedKey(info=info, secret=secret)

    async def list(self, *, include_revoked: bool = True) -> list[KeyInfo]:
        """Every key, oldest first, without secrets."""
        where = "" if include_revoked else " WHERE revoked_at IS NULL"
        rows = await self._db.fetch(f"SELECT {_COLUMNS} FROM api_keys{where} ORDER BY created_at")
        return [_info(r) for r in rows]

    async def get(self, key_id: str) -> KeyInfo | None:
        """One key by id, or None."""
        rows = await self._db.fetch(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return _info(rows[0]) if rows else None

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key; False if no such key or already revoked."""
        changed = await self._db.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            (time.time(), key_id),
        )
        self.forget(key_id)
        return changed > 0
