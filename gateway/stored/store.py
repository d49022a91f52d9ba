"""The stored-response table (``migrations/0003_responses.sql``, ``0005``) behind one small
interface.

A response is stored by reference: its row keeps its own input items and the response,
and ``previous_id`` names the response it continues, so a continuation writes only what
is new (a copy of the whole conversation per turn made every turn cost the chain's size).
Reading a conversation walks the chain in one recursive query. Rows belong to the API key
that made them: another key's id is not found. A row past ``expires_at`` is never served;
a purge (at most once per ``purge_every_s``, by the process that writes) deletes expired
rows that no live response continues from, so an older turn stays readable through a newer
one while that is kept, as when every row held a copy. ``DELETE`` hides a row at once and
removes it as soon as nothing kept continues from it.

Example::

    store = DbResponseStore(db, retention_s=30 * 86400)
    await store.save(StoredResponse("resp_1", "key_1", now, store.expiry(now), items, body))
    found = await store.get("resp_1", "key_1")      # None: unknown, expired or not yours
    links = await store.chain("resp_1", "key_1")    # [("resp_1", size)], newest first
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from gateway.bounds import valid_response_id
from gateway.errors import Overloaded
from gateway.offload import Offload
from gateway.storage.base import Database, StorageError

log = logging.getLogger("syntic.responses")

_COLUMNS = "id, key_id, created_at, expires_at, input_items, response, previous_id, size_bytes"
# A chain is not followed deeper than this (ids are the gateway's own, so no cycle can
# form; the bound keeps one query finite whatever the table holds).
MAX_CHAIN_DEPTH = 100_000


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response; ``input_items`` (its own input, after the conversation of
    ``previous_id`` when it names one) and ``response`` are the wire JSON."""

    id: str
    key_id: str
    created_at: float
    expires_at: float
    input_items: list[Any]
    response: dict[str, Any]
    previous_id: str | None = None
    # As read back: the UTF-8 size of both JSON texts.
    stored_bytes: int = 0


class ResponseStore(Protocol):
    async def save(
        self, stored: StoredResponse, *, offload: Offload | None = None, size: int = 0
    ) -> None: ...
    async def get(self, response_id: str, key_id: str) -> StoredResponse | None: ...
    async def chain(self, response_id: str, key_id: str) -> list[tuple[str, int]]: ...
    async def load(
        self, ids: Sequence[str], key_id: str, *, offload: Offload | None = None
    ) -> list[StoredResponse]: ...
    async def bytes_used(self, key_id: str) -> int: ...
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


def _encoded(stored: StoredResponse) -> tuple[bytes, bytes]:
    return orjson.dumps(stored.input_items), orjson.dumps(stored.response)


def _stored(row: Sequence[Any]) -> StoredResponse:
    rid, kid, created, expires, items, body, previous, size = row
    return StoredResponse(
        id=str(rid),
        key_id=str(kid),
        created_at=float(created),
        expires_at=float(expires),
        input_items=orjson.loads(items),
        response=orjson.loads(body),
        previous_id=None if previous is None else str(previous),
        stored_bytes=int(size) or _utf8_size(items) + _utf8_size(body),
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

    async def save(
        self, stored: StoredResponse, *, offload: Offload | None = None, size: int = 0
    ) -> None:
        """Insert one response. Raises ``Overloaded`` (503) when the database refuses or
        cannot be reached. With ``offload``, a large one (``size``: what the request it
        answers cost) is encoded off the event loop."""
        if offload is None:
            items, body = _encoded(stored)
        else:
            items, body = await offload.run(size, _encoded, stored)
        try:
            await self.db.execute(
                f"INSERT INTO responses ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.id,
                    stored.key_id,
                    stored.created_at,
                    stored.expires_at,
                    items.decode(),
                    body.decode(),
                    stored.previous_id,
                    len(items) + len(body),
                ),
            )
        except StorageError as exc:
            raise _unavailable() from exc
        await self._maybe_purge()

    async def get(self, response_id: str, key_id: str) -> StoredResponse | None:
        """The key's unexpired response ``response_id``, or None."""
        if not valid_response_id(response_id):
            return None  # not an id this gateway issues: no database call
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM responses WHERE id = ? AND key_id = ? AND expires_at > ?",
            (response_id, key_id, self._clock()),
        )
        return _stored(rows[0]) if rows else None

    async def chain(self, response_id: str, key_id: str) -> list[tuple[str, int]]:
        """``(id, size_bytes)`` of the key's unexpired ``response_id`` and of each response
        it continues, newest first; empty when that response is not found. The earlier
        links are followed whatever their own expiry: the purge keeps them."""
        if not valid_response_id(response_id):
            return []
        rows = await self._fetch(
            "WITH RECURSIVE chain(id, previous_id, size_bytes, depth) AS ("
            " SELECT id, previous_id, size_bytes, 0 FROM responses"
            " WHERE id = ? AND key_id = ? AND expires_at > ?"
            " UNION ALL"
            " SELECT r.id, r.previous_id, r.size_bytes, c.depth + 1 FROM responses r"
            " JOIN chain c ON r.id = c.previous_id WHERE r.key_id = ? AND c.depth < ?"
            ") SELECT id, size_bytes FROM chain ORDER BY depth",
            (response_id, key_id, self._clock(), key_id, MAX_CHAIN_DEPTH),
        )
        return [(str(rid), int(size)) for rid, size in rows]

    async def load(
        self, ids: Sequence[str], key_id: str, *, offload: Offload | None = None
    ) -> list[StoredResponse]:
        """The key's rows ``ids`` (as ``chain`` named them), in that order; a row deleted
        between the two reads is missing from the result. With ``offload``, a large
        conversation's JSON is parsed off the event loop."""
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM responses WHERE key_id = ? AND id IN ({marks})",
            (key_id, *ids),
        )
        if offload is None:
            parsed = list(map(_stored, rows))
        else:
            size = sum(int(row[7] or 0) for row in rows)
            parsed = await offload.run(size, lambda: list(map(_stored, rows)))
        found = {row.id: row for row in parsed}
        return [found[i] for i in ids if i in found]

    async def bytes_used(self, key_id: str) -> int:
        """What the key's rows hold (expired ones count until the purge deletes them)."""
        rows = await self._fetch(
            "SELECT COALESCE(SUM(size_bytes), 0) FROM responses WHERE key_id = ?", (key_id,)
        )
        return int(rows[0][0]) if rows else 0

    async def delete(self, response_id: str, key_id: str) -> bool:
        """Delete the key's response; False when there was none (or it had expired). One
        that a kept response continues from is hidden now and purged after it."""
        if not valid_response_id(response_id):
            return False
        now = self._clock()
        try:
            changed = await self.db.execute(
                "UPDATE responses SET expires_at = ? WHERE id = ? AND key_id = ? "
                "AND expires_at > ?",
                (now, response_id, key_id, now),
            )
            if changed:
                await self.db.execute(
                    "DELETE FROM responses WHERE id = ? AND key_id = ? AND NOT EXISTS "
                    "(SELECT 1 FROM responses c WHERE c.previous_id = ? AND c.key_id = ?)",
                    (response_id, key_id, response_id, key_id),
                )
        except StorageError as exc:
            raise _unavailable() from exc
        return changed > 0

    async def purge(self) -> int:
        """Delete every expired row that no unexpired response continues from (through any
        number of links); returns how many went."""
        now = self._clock()
        self._last_purge = now
        return await self.db.execute(
            "WITH RECURSIVE kept(id, key_id) AS ("
            " SELECT previous_id, key_id FROM responses"
            " WHERE expires_at > ? AND previous_id IS NOT NULL"
            " UNION"
            " SELECT r.previous_id, r.key_id FROM responses r"
            " JOIN kept k ON r.id = k.id AND r.key_id = k.key_id"
            " WHERE r.previous_id IS NOT NULL"
            ") DELETE FROM responses WHERE expires_at <= ? AND NOT EXISTS"
            " (SELECT 1 FROM kept k WHERE k.id = responses.id AND k.key_id = responses.key_id)",
            (now, now),
        )

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        try:
            return list(await self.db.fetch(sql, params))
        except StorageError as exc:
            raise _unavailable() from exc

    async def _maybe_purge(self) -> None:
        if self._clock() - self._last_purge < self.purge_every_s:
            return
        try:
            await self.purge()
        except StorageError as exc:  # the next write tries again
            log.warning("purging expired responses failed: %s", exc)
