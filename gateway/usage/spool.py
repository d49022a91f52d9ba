"""The ledger's local spool: append-only JSON-lines files, one set per process.

Every metered request's ``UsageRecord`` is appended here (one ``write`` each, straight
into the page cache) before its response completes, so a row survives the process: a
SIGKILL or an OOM kill loses nothing already written; ``fsync`` runs in batches on a
thread (the target is a process crash, not a power cut). An upstream call about to start
appends a *provisional* line first (the record as it would stand if the process died now:
status 502 ``gateway_interrupted``, ``estimated``); the request's final line supersedes it.

Files are ``usage-spool-<pid>-<random>.jsonl`` in the data directory. The process that
writes a file holds an exclusive ``flock`` on it for as long as it lives, so another
process (a restarted replica, a sibling worker) can tell a dead owner's file from a live
one by taking the lock, whatever the pids. A file is replayed by claiming it under that
lock (renamed ``usage-replay-<pid>-<random>.jsonl``); a claimer that dies mid-replay
releases the lock and the next one takes the file over.

Replay keeps, per request id, the final line when there is one, else the last provisional
one (an upstream call started and the request never finished); all of one dead owner's
files are merged first, since a provisional line may be carried into a newer file whose
final line supersedes it. Inserting is idempotent by request id, so replaying twice is
harmless.

A write can fail (a full disk): ``append`` then says so and the caller keeps the record
(``gateway.usage.ledger`` holds it in memory); a partly written line is cut off again, so
the file never holds a torn line between two whole ones. A request's provisional line is
carried into new files until its final line is in a file or ``forget`` says the database
has the row.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from gateway.usage.base import UsageRecord

log = logging.getLogger("syntic.usage")

_PROVISIONAL = b'{"started":'
_DUMPS_OPTIONS = orjson.OPT_APPEND_NEWLINE


def _line(record: UsageRecord) -> bytes:
    return orjson.dumps(record, default=str, option=_DUMPS_OPTIONS)


def _provisional_line(record: UsageRecord) -> bytes:
    return _PROVISIONAL + orjson.dumps(record, default=str) + b"}\n"


@dataclass(slots=True)
class Segment:
    """One open spool file of this process (its ``flock`` is held while it is open)."""

    path: Path
    fd: int
    size: int = 0
    torn: bool = False  # a failed write left a partial line that could not be cut off

    def close(self) -> None:
        os.close(self.fd)  # releases the lock

    def put(self, data: bytes) -> None:
        """Append ``data`` whole, or raise ``OSError`` with the file as it was (a partial
        write is truncated away; if even that fails the next line starts on a new one)."""
        if self.torn:
            data = b"\n" + data
        view: bytes | memoryview = data  # what is still to be written
        try:
            written = os.write(self.fd, data)  # nearly always whole: no view then
            if written < len(data):
                view = memoryview(data)[written:]
                while view:  # a short write (a full disk, a signal): write the rest
                    view = view[os.write(self.fd, view) :]
        except OSError:
            if len(view) < len(data):
                try:
                    os.ftruncate(self.fd, self.size)
                except OSError:
                    self.torn = True
            raise
        self.size += len(data)
        self.torn = False


@dataclass(slots=True)
class Parsed:
    """The lines of some spool files, reduced to one record per request id."""

    final: dict[str, UsageRecord]
    provisional: dict[str, UsageRecord]
    unreadable: int = 0

    def records(self, *, with_provisional: bool) -> list[UsageRecord]:
        out = list(self.final.values())
        if with_provisional:
            out.extend(r for rid, r in self.provisional.items() if rid not in self.final)
        return out


def parse(datas: Iterable[bytes]) -> Parsed:
    """Merge the lines of several files (any order): final lines win over provisional."""
    parsed = Parsed({}, {})
    for data in datas:
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                raw = orjson.loads(line)
                started = raw.get("started") if isinstance(raw, dict) else None
                record = UsageRecord(**(started if started is not None else raw))
            except (orjson.JSONDecodeError, TypeError, ValueError):
                parsed.unreadable += 1  # e.g. a torn last line: the process died mid-write
                continue
            if started is None:
                parsed.final[record.request_id] = record
            else:
                parsed.provisional[record.request_id] = record
    return parsed


class Spool:
    """This process's spool files in ``directory`` (see module docstring). Not thread-safe:
    used from one event loop."""

    def __init__(self, directory: Path, *, segment_bytes: int = 4 * 1024 * 1024) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.active: Segment | None = None
        self.sealed: list[Segment] = []
        # Provisional lines of requests still running, carried into each new file so that
        # dropping an old file never drops the only trace of an upstream call in flight.
        self._inflight: dict[str, bytes] = {}
        self._unsynced = False
        self.write_errors = 0

    # -- writing (the request path) ----------------------------------------------------

    def append(self, record: UsageRecord) -> bool:
        """The request's final record; True once it is in the file. Never raises: a failed
        write is logged and counted, and False tells the caller to keep the record."""
        if not self._write(_line(record)):
            return False
        self._inflight.pop(record.request_id, None)
        return True

    def append_provisional(self, record: UsageRecord) -> None:
        """What to bill if the process dies before ``append`` for this request id."""
        line = _provisional_line(record)
        self._inflight[record.request_id] = line
        self._write(line)

    def forget(self, request_id: str) -> None:
        """The request's row is in the database: stop carrying its provisional line."""
        self._inflight.pop(request_id, None)

    def _write(self, data: bytes) -> bool:
        try:
            segment = self.active if self.active is not None else self._open()
            segment.put(data)
        except OSError as exc:
            self.write_errors += 1
            if self.write_errors == 1 or self.write_errors % 1000 == 0:
                log.error("ledger spool: write failed (%d so far): %s", self.write_errors, exc)
            return False
        self._unsynced = True
        return True

    def _open(self) -> Segment:
        """A new active file holding the provisional lines of the requests still running;
        on a failure nothing of it is left behind."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"usage-spool-{os.getpid()}-{secrets.token_hex(6)}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        segment = Segment(path, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            for line in list(self._inflight.values()):
                segment.put(line)
        except OSError:
            path.unlink(missing_ok=True)
            segment.close()
            raise
        self.active = segment
        return segment

    # -- upkeep (the writer task) ------------------------------------------------------

    def sync(self) -> None:
        """``fsync`` what was appended since the last call (blocking: run on a thread)."""
        segment = self.active
        if segment is None or not self._unsynced:
            return
        self._unsynced = False
        try:
            os.fsync(segment.fd)
        except OSError as exc:
            log.error("ledger spool: fsync failed: %s", exc)

    @property
    def unsynced(self) -> bool:
        """Whether something was appended since the last ``sync``."""
        return self._unsynced

    @property
    def full(self) -> bool:
        return self.active is not None and self.active.size >= self.segment_bytes

    def seal(self) -> None:
        """Start a new file for what comes next; the current one waits to be dropped. The
        provisional lines of requests still running go into the new file at once, so
        dropping the old one never leaves them only in memory."""
        if self.active is not None:
            self.sealed.append(self.active)
            self.active = None
            self._unsynced = False
            if self._inflight:
                try:
                    self._open()
                    self._unsynced = True
                except OSError as exc:
                    self.write_errors += 1
                    log.error("ledger spool: cannot start a new file: %s", exc)

    def sealed_records(self) -> list[UsageRecord]:
        """The final records in the sealed files (this process's own: a provisional line
        there belongs to a request that is still running or finished in a newer file)."""
        datas = [_read(s.path) for s in self.sealed]
        return parse(d for d in datas if d is not None).records(with_provisional=False)

    def drop_sealed(self) -> bool:
        """Delete the sealed files: every final record in them is in the database. Not
        while they hold the only copy of a running request's provisional line (a new file
        could not be started): False, they are kept for the next call."""
        if self._inflight and self.active is None and self.sealed:
            try:
                self._open()
                self._unsynced = True
            except OSError as exc:
                self.write_errors += 1
                log.error("ledger spool: cannot start a new file: %s", exc)
                return False
        for segment in self.sealed:
            segment.path.unlink(missing_ok=True)
            segment.close()
        self.sealed.clear()
        return True

    def close(self, *, keep: bool) -> None:
        """Close every file (releasing its lock); ``keep``: leave them for a replay."""
        if self.active is not None:
            self.sealed.append(self.active)
            self.active = None
        if keep or self._inflight:
            for segment in self.sealed:
                segment.close()
            self.sealed.clear()
        else:
            self.drop_sealed()

    # -- other processes' files --------------------------------------------------------

    def orphans_present(self) -> bool:
        """Whether some spool file has no live owner (cheap enough for a status check)."""
        return any(_unowned(p) for p in self._candidates())

    def _candidates(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(
            [
                *self.directory.glob("usage-spool-*.jsonl"),
                *self.directory.glob("usage-replay-*.jsonl"),
            ]
        )

    def claim_orphans(self) -> list[Segment]:
        """Take over every file whose owner is gone: each is renamed and stays locked
        (open) until ``release_claimed`` or this process dies."""
        claimed: list[Segment] = []
        for path in self._candidates():
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.stat(path).st_ino != os.fstat(fd).st_ino:
                    raise FileNotFoundError(path)  # replayed and deleted meanwhile
                target = path.with_name(f"usage-replay-{os.getpid()}-{secrets.token_hex(6)}.jsonl")
                path.rename(target)
            except OSError:  # owned by a live process, or gone
                os.close(fd)
                continue
            claimed.append(Segment(target, fd))
        return claimed

    @staticmethod
    def claimed_records(claimed: list[Segment]) -> tuple[list[UsageRecord], int]:
        """The records of dead owners' files, provisional ones included; and how many
        lines could not be read."""
        datas = [_read(s.path) for s in claimed]
        parsed = parse(d for d in datas if d is not None)
        return parsed.records(with_provisional=True), parsed.unreadable

    @staticmethod
    def release_claimed(claimed: list[Segment], *, replayed: bool) -> None:
        """Delete the claimed files once replayed, else unlock them for the next try."""
        for segment in claimed:
            if replayed:
                segment.path.unlink(missing_ok=True)
            segment.close()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _unowned(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
