"""The usage ledger: ``record()`` spools and enqueues, a background task writes batches.

* On the caller's path: one append to the local spool (``gateway.usage.spool``: a write
  into the page cache, no database round trip, no fsync) and one to an in-memory deque.
  The spool is what makes a row outlive the process.
* A writer task inserts batches (every ``flush_interval_s`` or ``batch_size`` rows) with
  ``ON CONFLICT (request_id) DO NOTHING``, so a replayed row never duplicates; it also
  fsyncs the spool in batches, starts a new spool file past ``segment_bytes`` and deletes
  the old one once all its rows are in the database.
* Database down: queued rows leave memory once they are in the spool, and the spool files
  are replayed once the database answers again. ``aclose()`` drains the queue; what the
  database did not take stays in the spool for the next start.
* A row the spool did not take (a full disk, an unwritable directory) is *held* in memory
  until the spool (retried every ``flush_interval_s``) or the database takes it; never
  dropped on the assumption that it was spooled. Past ``max_held_rows`` held rows
  ``accepting`` turns False and the request path refuses new requests (503
  ``ledger_unavailable``) instead of answering them without a durable row.
* At start (and again after an outage), spool files whose owner died (a SIGKILL, an OOM
  kill) are claimed and replayed, provisional records of interrupted requests included.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import operator
import os
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from gateway.storage.base import Database, StorageDataError, StorageError, StorageUnavailable
from gateway.usage.base import UsageRecord
from gateway.usage.spool import Spool

log = logging.getLogger("syntic.usage")

FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(UsageRecord))
INSERT_SQL = (
    f"INSERT INTO usage_records ({', '.join(FIELDS)}) VALUES ({', '.join('?' for _ in FIELDS)})"
    " ON CONFLICT (request_id) DO NOTHING"
)


def _converter(type_name: str) -> Any:
    base = type_name.replace(" | None", "")
    convert: Any = {"str": str, "int": int, "float": float, "bool": bool}[base]
    if "None" in type_name:
        return lambda v: None if v is None else convert(v)
    return convert


# Normalise each value to its declared type, so a float token count or an int timestamp
# from the request path can't become a row PostgreSQL refuses (asyncpg is strict).
_CONVERTERS = tuple(_converter(str(f.type)) for f in dataclasses.fields(UsageRecord))


def _exact_types(type_name: str) -> tuple[type, ...]:
    base = {"str": str, "int": int, "float": float, "bool": bool}[type_name.replace(" | None", "")]
    return (base, type(None)) if "None" in type_name else (base,)


# Per field, the value types that need no conversion (exact types: a bool is not an int).
_EXACT = tuple(_exact_types(str(f.type)) for f in dataclasses.fields(UsageRecord))
_VALUES = operator.attrgetter(*FIELDS)


def record_params(rec: UsageRecord) -> tuple[Any, ...]:
    """The INSERT parameters for one record, in ``FIELDS`` order. Raises ``ValueError`` or
    ``TypeError`` for a value that can't be coerced to its column type."""
    values: tuple[Any, ...] = _VALUES(rec)
    # Nearly every record is already typed exactly: then the values are the parameters.
    # Checked as one tuple of types against the combinations seen to be exact (a few:
    # nullable fields), a set lookup instead of a converter call per field.
    types = tuple(map(type, values))
    if types in _EXACT_SEEN:
        return values
    if all(t in exact for t, exact in zip(types, _EXACT, strict=True)):
        _EXACT_SEEN.add(types)
        return values
    return tuple(conv(v) for conv, v in zip(_CONVERTERS, values, strict=True))


_EXACT_SEEN: set[tuple[type, ...]] = set()  # at most 2 ** (nullable fields) entries


class DbLedger:
    """Implements the ``Ledger`` protocol on a ``Database``; call ``start()`` once on the
    running loop and ``aclose()`` at shutdown."""

    def __init__(
        self,
        db: Database,
        spool_dir: Path,
        *,
        flush_interval_s: float = 0.2,
        batch_size: int = 500,
        retry_interval_s: float = 1.0,
        segment_bytes: int = 4 * 1024 * 1024,
        rescan_interval_s: float = 30.0,
        max_held_rows: int = 10_000,
        close_hold_s: float = 5.0,
    ) -> None:
        self._db = db
        self.spool_dir = Path(spool_dir)
        self.spool = Spool(self.spool_dir, segment_bytes=segment_bytes)
        self.flush_interval_s = flush_interval_s
        self.batch_size = batch_size
        self.retry_interval_s = retry_interval_s
        self.rescan_interval_s = rescan_interval_s
        self._queue: deque[UsageRecord] = deque()  # in the spool, not yet in the database
        # Rows neither the spool nor the database has taken yet (see module docstring), and
        # how many of them are being written to the database right now.
        self._held: deque[UsageRecord] = deque()
        self._held_writing = 0
        self.max_held_rows = max_held_rows
        self.close_hold_s = close_hold_s  # how long aclose keeps trying for held rows
        self.accepting = True  # False: held rows past max_held_rows (read per request)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._db_down = False
        self._retry_at = 0.0
        # Rows ever queued, and rows taken off the queue for good (in the database, set
        # aside, or left to a spool replay): a sealed spool file may go once every row
        # queued before it was sealed is settled.
        self._enqueued = 0
        self._settled = 0
        self._seal_mark: int | None = None
        self._deferred = False  # rows were left in the spool files for a replay
        # Counters for metrics.
        self.written = 0
        self.spooled = 0  # rows left to a spool replay because the database was down
        self.replayed = 0
        self.rejected = 0
        self.lost = 0  # held rows neither took by the end of aclose (logged as errors)
        self._rejects = self.spool_dir / f"usage-rejected-{os.getpid()}.jsonl"

    # -- hot path ---------------------------------------------------------------

    def record(self, record: UsageRecord) -> None:
        """Spool and enqueue one final row; no database round trip, no fsync. A row the
        spool refuses is held in memory until the spool or the database takes it."""
        if self.spool.append(record):
            self._queue.append(record)
        else:
            self._held.append(record)
            self._update_accepting()
        self._enqueued += 1
        if len(self._queue) + len(self._held) >= self.batch_size:
            self._wake.set()

    def started(self, record: UsageRecord) -> None:
        """Spool the row to bill if this process dies before ``record`` for this request
        (an upstream call is about to start); never written to the database otherwise."""
        self.spool.append_provisional(record)

    @property
    def queue_depth(self) -> int:
        """Rows waiting in memory (not yet in the database)."""
        return len(self._queue) + self.held

    @property
    def held(self) -> int:
        """Rows in memory only: neither the spool nor the database has taken them."""
        return len(self._held) + self._held_writing

    def _update_accepting(self) -> None:
        accepting = self.held < self.max_held_rows
        if accepting != self.accepting:
            self.accepting = accepting
            if accepting:
                log.warning("ledger: %d row(s) held in memory, accepting requests again", self.held)
            else:
                log.error(
                    "ledger: %d row(s) held in memory (neither the spool nor the "
                    "database takes them): refusing new requests",
                    self.held,
                )

    @property
    def spool_pending(self) -> bool:
        """Whether spooled rows are waiting to be replayed (this process's, after an
        outage, or a dead process's)."""
        return self._deferred or self.spool.orphans_present()

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        """Start the writer task on the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="syntic-ledger-writer")

    async def flush(self) -> None:
        """Write everything queued now to the database. When it is down, spooled rows are
        left to the spool and held rows are offered to the spool again (else kept)."""
        await self._flush_held()
        queue = self._queue
        while queue:
            batch = [queue.popleft() for _ in range(min(self.batch_size, len(queue)))]
            try:
                written = await self._write(batch)
            except BaseException:
                # Cancelled mid-write (or a bug): put the rows back, oldest first.
                queue.extendleft(reversed(batch))
                raise
            if not written:
                self._defer(len(batch))

    async def _flush_held(self) -> None:
        held = self._held
        while held and not self._db_down:
            batch = [held.popleft() for _ in range(min(self.batch_size, len(held)))]
            self._held_writing = len(batch)
            try:
                written = await self._write(batch)
            except BaseException:
                held.extendleft(reversed(batch))
                raise
            finally:
                self._held_writing = 0
            if not written:
                held.extendleft(reversed(batch))
            else:
                for record in batch:
                    self.spool.forget(record.request_id)
        self._respool()
        self._update_accepting()

    def _respool(self) -> None:
        """Offer held rows to the spool again, oldest first, until it refuses one."""
        held = self._held
        while held and self.spool.append(held[0]):
            held.popleft()
            self._defer(1)

    async def aclose(self) -> None:
        """Stop the writer and drain the queue; nothing recorded before this is lost (what
        the database does not take now stays in the spool for the next start)."""
        self._closing = True
        if self._task is not None:
            self._wake.set()
            task, self._task = self._task, None
            # Let an in-flight write finish rather than cancelling it halfway; cancel only
            # if it hangs (its batch is then re-queued and written below).
            done, _ = await asyncio.wait({task}, timeout=10.0)
            if not done:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # One more real attempt at the database even if it was down a moment ago (it may be
        # back and the retry timer not yet run).
        self._db_down = False
        await self.flush()
        if not self._db_down and self._deferred:
            await self._recover()
        if not self._db_down:
            await self._replay_orphans()
        await self._keep_trying_held()
        await asyncio.to_thread(self.spool.sync)
        self.spool.close(keep=self._deferred)

    async def _keep_trying_held(self) -> None:
        """Held rows at shutdown: the spool and the database are asked again for up to
        ``close_hold_s``; what neither takes by then is lost, and logged as such."""
        deadline = time.monotonic() + self.close_hold_s
        while self._held and time.monotonic() < deadline:
            await asyncio.sleep(self.retry_interval_s)
            self._db_down = False
            await self._flush_held()
        if self._held:
            self.lost += len(self._held)
            log.error(
                "ledger: %d row(s) lost at shutdown: neither the spool nor the database took them",
                len(self._held),
            )
            self._held.clear()

    # -- writer -----------------------------------------------------------------

    async def _run(self) -> None:
        await self._replay_orphans()
        rescan_at = time.monotonic() + self.rescan_interval_s
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
            self._wake.clear()
            try:
                if self.spool.unsynced:  # no thread hop when idle
                    await asyncio.to_thread(self.spool.sync)
                if self._db_down:
                    self._defer(len(self._queue))
                    self._queue.clear()
                    self._respool()
                    self._update_accepting()
                    if time.monotonic() >= self._retry_at and not self._closing:
                        await self._recover()
                    continue
                if self.spool.full:
                    self.spool.seal()
                    self._seal_mark = self._enqueued
                await self.flush()
                mark = self._seal_mark
                if (
                    mark is not None
                    and not self._deferred
                    and self._settled >= mark
                    and self.spool.drop_sealed()
                ):
                    self._seal_mark = None
                if time.monotonic() >= rescan_at and not self._db_down:
                    rescan_at = time.monotonic() + self.rescan_interval_s
                    await self._replay_orphans()
            except asyncio.CancelledError:
                raise
            except Exception:  # the writer must survive anything; rows stay spooled
                log.exception("ledger writer: unexpected error")
                await asyncio.sleep(self.retry_interval_s)

    def _defer(self, n: int) -> None:
        """``n`` rows taken off the queue stay in the spool files only, for a replay."""
        self._deferred = True
        self.spooled += n
        self._settled += n

    def _went_down(self, exc: StorageUnavailable) -> None:
        if not self._db_down:
            log.warning("ledger: database unavailable, rows stay in the spool: %s", exc)
        self._db_down = True
        self._retry_at = time.monotonic() + self.retry_interval_s

    async def _write(self, batch: Sequence[UsageRecord]) -> bool:
        """Insert a batch; False when the database is (or just went) down."""
        if self._db_down:
            return False
        try:
            await self._insert(self._params(batch))
        except StorageUnavailable as exc:
            self._went_down(exc)
            return False
        self._settled += len(batch)
        return True

    def _params(self, records: Sequence[UsageRecord]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for r in records:
            try:
                rows.append(record_params(r))
            except (TypeError, ValueError) as exc:
                self._reject([dataclasses.asdict(r)], exc)
        return rows

    async def _insert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows in batches. If the database refuses the values themselves, insert
        row by row and set aside only the rows it refuses, so one bad row can't block the
        rest forever. Any other failure (connection, missing table, ...) raises
        ``StorageUnavailable``: the rows are kept (spooled) and retried, never discarded."""
        for i in range(0, len(rows), self.batch_size):
            await self._insert_batch(rows[i : i + self.batch_size])

    async def _insert_batch(self, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        try:
            await self._db.executemany(INSERT_SQL, rows)
            self.written += len(rows)
            return
        except StorageDataError as exc:
            log.error("ledger: batch refused (%s); retrying row by row", exc)
        except StorageError as exc:
            raise _as_unavailable(exc) from exc
        for row in rows:
            try:
                await self._db.executemany(INSERT_SQL, [row])
                self.written += 1
            except StorageDataError as exc:
                self._reject([dict(zip(FIELDS, row, strict=True))], exc)
            except StorageError as exc:
                raise _as_unavailable(exc) from exc

    def _reject(self, rows: list[dict[str, Any]], exc: BaseException) -> None:
        """Keep refused rows aside (never replayed automatically) for an operator."""
        self.rejected += len(rows)
        log.error("ledger: %d row(s) refused, kept in %s: %s", len(rows), self._rejects, exc)
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        with open(self._rejects, "ab") as fh:
            for row in rows:
                fh.write(orjson.dumps(row, default=str) + b"\n")

    async def _recover(self) -> None:
        """After an outage: replay this process's spool files (everything recorded so far
        is sealed into them first), then any dead process's."""
        self.spool.seal()
        records = await asyncio.to_thread(self.spool.sealed_records)
        try:
            await self._insert(self._params(records))
        except StorageUnavailable as exc:
            self._went_down(exc)
            return
        self.replayed += len(records)
        if self.spool.drop_sealed():
            self._seal_mark = None
        self._deferred = False
        if self._db_down:
            log.warning(
                "ledger: database reachable again, %d spooled row(s) replayed", len(records)
            )
            self._db_down = False
        await self._replay_orphans()

    async def _replay_orphans(self) -> None:
        """Replay the spool files of processes that are gone (each file claimed under its
        lock, deleted once its rows are in; duplicates are harmless: ON CONFLICT)."""
        claimed = self.spool.claim_orphans()
        if not claimed:
            return
        records, unreadable = await asyncio.to_thread(Spool.claimed_records, claimed)
        if unreadable:
            log.error("ledger: skipped %d unreadable spool line(s) (torn by a crash?)", unreadable)
        try:
            await self._insert(self._params(records))
        except StorageUnavailable as exc:
            Spool.release_claimed(claimed, replayed=False)
            self._went_down(exc)
            self._deferred = True
            return
        except BaseException:
            Spool.release_claimed(claimed, replayed=False)
            raise
        Spool.release_claimed(claimed, replayed=True)
        self.replayed += len(records)
        log.info(
            "ledger: replayed %d row(s) from %d spool file(s) of stopped processes",
            len(records),
            len(claimed),
        )


def _as_unavailable(exc: StorageError) -> StorageUnavailable:
    return exc if isinstance(exc, StorageUnavailable) else StorageUnavailable(str(exc))
