"""The usage ledger: ``record()`` enqueues, a background task writes batches.

* No I/O on the caller's path: ``record`` appends to an in-memory deque.
* A writer task inserts batches (every ``flush_interval_s`` or ``batch_size`` rows) with
  ``ON CONFLICT (request_id) DO NOTHING``, so a replayed row never duplicates.
* Database down: the batch is appended to a local JSON-lines spool file
  (``<data dir>/usage-spool-<pid>.jsonl``) and replayed, oldest first, once the database
  answers again. ``aclose()`` drains the queue (to the database or the spool), so a clean
  stop loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import operator
import os
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from gateway.storage.base import Database, StorageDataError, StorageError, StorageUnavailable
from gateway.usage.base import UsageRecord

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
    # nullable fields), a set lookup instead of a converter call per field (#8).
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
    ) -> None:
        self._db = db
        self.spool_dir = Path(spool_dir)
        self.spool_path = self.spool_dir / f"usage-spool-{os.getpid()}.jsonl"
        self.flush_interval_s = flush_interval_s
        self.batch_size = batch_size
        self.retry_interval_s = retry_interval_s
        self._queue: deque[UsageRecord] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._db_down = False
        # Counters for metrics.
        self.written = 0
        self.spooled = 0
        self.replayed = 0
        self.rejected = 0
        self._rejects = self.spool_dir / f"usage-rejected-{os.getpid()}.jsonl"

    # -- hot path ---------------------------------------------------------------

    def record(self, record: UsageRecord) -> None:
        """Enqueue one row; never blocks, never does I/O."""
        self._queue.append(record)
        if len(self._queue) >= self.batch_size:
            self._wake.set()

    @property
    def queue_depth(self) -> int:
        """Rows waiting in memory (not yet in the database or the spool)."""
        return len(self._queue)

    @property
    def spool_pending(self) -> bool:
        """Whether spooled rows are waiting to be replayed."""
        return any(self._spool_files())

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        """Start the writer task on the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="syntic-ledger-writer")

    async def flush(self) -> None:
        """Write everything queued now (to the database, else the spool)."""
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))]
            try:
                await self._write(batch)
            except BaseException:
                # Neither the database nor the spool took it (e.g. disk full) or we were
                # cancelled mid-write: put the rows back, oldest first, for the next try.
                self._queue.extendleft(reversed(batch))
                raise

    async def aclose(self) -> None:
        """Stop the writer and drain the queue; nothing recorded before this is lost."""
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
        # back and the retry timer not yet run); whatever fails now lands in the spool.
        self._db_down = False
        await self.flush()
        if not self._db_down:
            await self._replay()

    # -- writer -----------------------------------------------------------------

    async def _run(self) -> None:
        await self._replay()
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
            self._wake.clear()
            try:
                await self.flush()
                if self._db_down and not self._closing:
                    with contextlib.suppress(TimeoutError):  # woken early by aclose()
                        await asyncio.wait_for(self._wake.wait(), self.retry_interval_s)
                    if not self._closing:
                        await self._replay()
            except asyncio.CancelledError:
                raise
            except Exception:  # the writer must survive anything; rows stay queued/spooled
                log.exception("ledger writer: unexpected error")
                await asyncio.sleep(self.retry_interval_s)

    async def _write(self, batch: Sequence[UsageRecord]) -> None:
        if not self._db_down:
            rows: list[tuple[Any, ...]] = []
            for r in batch:
                try:
                    rows.append(record_params(r))
                except (TypeError, ValueError) as exc:
                    self._reject([dataclasses.asdict(r)], exc)
            try:
                await self._insert(rows)
                return
            except StorageUnavailable as exc:
                self._db_down = True
                log.warning("ledger: database unavailable, spooling: %s", exc)
        self._spool(batch)

    async def _insert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert a batch. If the database refuses the values themselves, insert row by row
        and set aside only the rows it refuses, so one bad row can't block the rest forever.
        Any other failure (connection, missing table, ...) raises ``StorageUnavailable``:
        the rows are kept (spooled) and retried, never discarded."""
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

    def _spool(self, batch: Sequence[UsageRecord]) -> None:
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        data = b"".join(orjson.dumps(dataclasses.asdict(r)) + b"\n" for r in batch)
        while True:
            with open(self.spool_path, "ab") as fh:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # held by a replayer only to rename
                try:
                    current = os.stat(self.spool_path).st_ino
                except FileNotFoundError:
                    current = -1
                if current != os.fstat(fh.fileno()).st_ino:
                    continue  # a replayer claimed the file we opened: reopen a fresh one
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
                break
        self.spooled += len(batch)

    def _claimable(self) -> list[Path]:
        if not self.spool_dir.is_dir():
            return []
        files = sorted(self.spool_dir.glob("usage-spool-*.jsonl"))
        # Claimed by a replayer that died before finishing: take it over.
        for path in sorted(self.spool_dir.glob("usage-replay-*.jsonl")):
            pid = path.name.split("-")[2]
            if pid.isdigit() and not _alive(int(pid)):
                files.append(path)
        return files

    def _spool_files(self) -> list[Path]:
        return self._claimable()

    def _claim(self, path: Path) -> Path | None:
        claimed = path.with_name(f"usage-replay-{os.getpid()}-{uuid.uuid4().hex}.jsonl")
        try:
            with open(path, "rb") as fh:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                path.rename(claimed)
        except FileNotFoundError:
            return None  # another process claimed it first
        return claimed

    async def _replay(self) -> None:
        """Replay every spool file in the data dir (any process's; duplicates are harmless
        thanks to ON CONFLICT). A file is claimed by renaming it under its lock, so two
        replicas sharing a data dir don't both read it, and it is deleted only after all its
        rows are in the database."""
        for path in self._claimable():
            claimed = self._claim(path)
            if claimed is None:
                continue
            if not await self._replay_file(claimed):
                # Still down: hand the rows back under a fresh spool name for the next try.
                claimed.rename(path.with_name(f"usage-spool-{uuid.uuid4().hex}.jsonl"))
                return
            claimed.unlink()
        if self._db_down:
            log.warning("ledger: database reachable again, spool replayed")
            self._db_down = False

    async def _replay_file(self, path: Path) -> bool:
        rows: list[tuple[Any, ...]] = []
        data = await asyncio.to_thread(path.read_bytes)
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                rows.append(record_params(UsageRecord(**orjson.loads(line))))
            except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
                # e.g. a torn last line after a crash mid-append
                log.error("ledger: skipping unreadable spool line in %s: %s", path, exc)
        try:
            for i in range(0, len(rows), self.batch_size):
                await self._insert(rows[i : i + self.batch_size])
        except StorageUnavailable:
            self._db_down = True
            return False
        self.replayed += len(rows)
        return True


def _as_unavailable(exc: StorageError) -> StorageUnavailable:
    return exc if isinstance(exc, StorageUnavailable) else StorageUnavailable(str(exc))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
