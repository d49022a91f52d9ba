"""The stored-response table (``migrations/0003_responses.sql``) behind one small interface.

A response is stored with the conversation that led to it (``input_items``: the items of
every earlier response it continues, then its own input) so ``previous_response_id``
needs one read. Rows belong to the API key that made them: another key's id is not
found. A row past ``expires_at`` is never served, and expired rows are deleted at most
once per ``purge_every_s`` by the process that writes.

Example::

    store = DbResponseStore(db, retention_s=30 * 86400)
    await store.save(StoredResponse("resp_1", "key_1", now, store.expiry(now), items, body))
    found = await store.get("resp_1", "key_1")     # None: unknown, expired or not yours
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from gateway.bounds import valid_response_id
from gateway.errors import Overloaded
from gateway.storage.base import Database, StorageError

log = logging.getLogger("syntic.responses")

_COLUMNS = "id, key_id, created_at, expires_at, input_items, response"


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response; ``input_items`` and ``response`` are the wire JSON."""

    id: str
    key_id: str
    created_at: float
    expires_at: float
    input_items: list[Any]
    response: dict[str, Any]
    # As read back: the UTF-8 size of both JSON texts, what a continuation loads.
    stored_bytes: int = 0


class ResponseStore(Protocol):
    async def save(self, stored: StoredResponse) -> None: ...
    async def get(self, response_id: str, key_id: str) -> StoredResponse | None: ...
    async def delete(self, response_id: str, key_id: str) -> bool: ...


def _utf8_size(text: str | bytes) -> int:
    # A driver hands TEXT back as str: its length counts characters, not bytes.
    return len(text.encode()) if isinstance(text, str) else len(text)


def _unavailable() -> Overloaded:
    return Overloaded(
        "Stored responses are unavailable right now; retry shortly.",
        code="response_store_unavailable",
        headers={"retry-after": "1"},
    )


class DbResponseStore:
    """``ResponseStore`` on the gateway's database (SQLite or PostgreSQL)."""

    def __init__(
        self,
        db: Database,
        retention_s: float,
        *,
        purge_every_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.retention_s = retention_s
        self.purge_every_s = purge_every_s
        self._clock = clock
        self._last_purge = float("-inf")

    def expiry(self, created_at: float) -> float:
        return created_at + self.retention_s

    async def save(self, stored: StoredResponse) -> None:
        """Insert one response. Raises ``Overloaded`` (503) when the database refuses or
        cannot be reached."""
        try:
            await self.db.execute(
                f"INSERT INTO responses ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    stored.id,
                    stored.key_id,
                    stored.created_at,
                    stored.expires_at,
                    orjson.dumps(stored.input_items).decode(),
                    orjson.dumps(stored.response).decode(),
                ),
            )
        except StorageError as exc:
            raise _unavailable() from exc
        await self._maybe_purge()

    async def get(self, response_id: str, key_id: str) -> StoredResponse | None:
        """The key's unexpired response ``response_id``, or None."""
        if not valid_response_id(response_id):
            return None  # not an id this gateway issues: no database call
        try:
            rows = await self.db.fetch(
                f"SELECT {_COLUMNS} FROM responses WHERE id = ? AND key_id = ? "
                "AND expires_at > ?",
                (response_id, key_id, self._clock()),
            )
        except StorageError as exc:
            raise _unavailable() from exc
        if not rows:
            return None
        rid, kid, created, expires, items, body = rows[0]
        return StoredResponse(
            id=str(rid),
            key_id=str(kid),
            created_at=float(created),
            expires_at=float(expires),
            input_items=orjson.loads(items),
            response=orjson.loads(body),
            stored_bytes=_utf8_size(items) + _utf8_size(body),
        )

    async def delete(self, response_id: str, key_id: str) -> bool:
        """Delete the key's response; False when there was none (or it had expired)."""
        if not valid_response_id(response_id):
            return False
        try:
            changed = await self.db.execute(
                "DELETE FROM responses WHERE id = ? AND key_id = ? AND expires_at > ?",
                (response_id, key_id, self._clock()),
            )
        except StorageError as exc:
            raise _unavailable() from exc
        return changed > 0

    async def purge(self) -> int:
        """Delete every expired row; returns how many went."""
        now = self._clock()
        self._last_purge = now
        return await self.db.execute("DELETE FROM responses WHERE expires_at <= ?", (now,))

    async def _maybe_purge(self) -> None:
        if self._clock() - self._last_purge < self.purge_every_s:
            return
        try:
            await self.purge()
        except StorageError as exc:  # the next write tries again
            log.warning("purging expired responses failed: %s", exc)
