"""The ledger across a process crash: a real child process spools rows and is SIGKILLed
before its writer flushes; a new ledger on the same data directory replays them exactly
once, bills the upstream call that was in flight (``gateway_interrupted``, estimated),
and leaves a live process's spool alone."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.storage import Database, open_database
from gateway.usage.ledger import FIELDS, DbLedger
from tests.support.gateway_proc import ROOT
from tests.usage.test_ledger import count, pfx

CHILD = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from gateway.context import RequestContext
    from gateway.storage import open_database
    from gateway.usage.ledger import DbLedger
    from tests.usage.test_ledger import rec

    async def main() -> None:
        url, data_dir, prefix = sys.argv[1:4]
        # A flush interval far beyond the test: only the spool can save these rows.
        ledger = DbLedger(open_database(url), Path(data_dir), flush_interval_s=3600)
        ledger.start()
        for i in range(50):
            ledger.record(rec(f"{prefix}done{i}"))
        finished = RequestContext.start(f"{prefix}finished", "/v1/chat/completions")
        finished.journal = ledger
        finished.upstream_call_starting()
        finished.status = 200
        ledger.record(finished.usage_record())
        inflight = RequestContext.start(f"{prefix}inflight", "/v1/chat/completions")
        inflight.journal = ledger
        inflight.model = "m1"
        inflight.prompt_estimate = 42
        inflight.upstream_call_starting()
        print("spooled", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    asyncio.run(main())
""")


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    handle = open_database(db_url)
    yield handle
    await handle.aclose()


def _spool_files(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("usage-*.jsonl"))


def _run_child(code: str, url: str, data_dir: Path, prefix: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, url, str(data_dir), prefix],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _child(url: str, data_dir: Path, prefix: str) -> subprocess.Popen[str]:
    proc = _run_child(CHILD, url, data_dir, prefix)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "spooled"
    return proc


async def _kill(proc: subprocess.Popen[str]) -> int:
    """SIGKILL, reap, and close our ends of its pipes; the exit status."""
    proc.send_signal(signal.SIGKILL)
    status = await asyncio.to_thread(proc.wait)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
    return status


async def _killed_child(url: str, data_dir: Path, prefix: str) -> None:
    """A child that spooled its rows, SIGKILLed before its writer flushed them."""
    await _kill(_child(url, data_dir, prefix))


async def _replay(db: Database, data_dir: Path) -> DbLedger:
    ledger = DbLedger(db, data_dir)
    ledger.start()
    await ledger.aclose()
    return ledger


async def test_a_killed_process_rows_are_replayed_once(
    database: Database, db_url: str, tmp_path: Path
) -> None:
    db = database
    p = pfx()
    proc = _child(db_url, tmp_path, p)
    # While the owner lives, its spool is its own: nothing is replayed from it.
    await _replay(db, tmp_path)
    assert await count(db, p) == 0
    assert await _kill(proc) == -signal.SIGKILL

    first = await _replay(db, tmp_path)
    assert first.replayed == 52
    assert await count(db, p) == 52
    rows = await db.fetch(
        f"SELECT {', '.join(FIELDS)} FROM usage_records WHERE request_id IN (?, ?)"
        " ORDER BY request_id",
        (f"{p}finished", f"{p}inflight"),
    )
    finished, inflight = (dict(zip(FIELDS, r, strict=True)) for r in rows)
    assert finished["status"] == 200 and not finished["estimated"]
    assert inflight["status"] == 502 and inflight["error_code"] == "gateway_interrupted"
    assert inflight["estimated"] and inflight["upstream_calls"] == 1
    assert inflight["prompt_tokens"] == 42 and inflight["model"] == "m1"
    assert _spool_files(tmp_path) == []
    again = await _replay(db, tmp_path)
    assert again.replayed == 0 and await count(db, p) == 52


async def test_a_torn_last_line_is_skipped_not_fatal(
    database: Database, db_url: str, tmp_path: Path
) -> None:
    db = database
    p = pfx()
    await _killed_child(db_url, tmp_path, p)
    (spool,) = _spool_files(tmp_path)
    with spool.open("ab") as fh:
        fh.write(b'{"request_id": "' + p.encode() + b'torn", "key_id')  # died mid-write
    await _replay(db, tmp_path)
    assert await count(db, p) == 52
    assert _spool_files(tmp_path) == []


async def test_replay_waits_for_the_database(
    database: Database, db_url: str, tmp_path: Path
) -> None:
    """A dead owner's spool found while the database is down stays until it is back."""
    db = database
    p = pfx()
    await _killed_child(db_url, tmp_path, p)
    down = open_database(f"sqlite:///{tmp_path}/unmigrated.db")
    await _replay(down, tmp_path)
    await down.aclose()
    assert _spool_files(tmp_path)
    await _replay(db, tmp_path)
    assert await count(db, p) == 52
    assert _spool_files(tmp_path) == []


ROTATING_CHILD = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from gateway.context import RequestContext
    from gateway.storage import open_database
    from gateway.usage.ledger import DbLedger
    from tests.usage.test_ledger import rec

    async def main() -> None:
        url, data_dir, prefix = sys.argv[1:4]
        ledger = DbLedger(open_database(url), Path(data_dir), flush_interval_s=0.01,
                          segment_bytes=4096)
        ledger.start()
        inflight = RequestContext.start(f"{prefix}inflight", "/v1/chat/completions")
        inflight.journal = ledger
        inflight.upstream_call_starting()  # and never finishes
        for i in range(300):
            ledger.record(rec(f"{prefix}done{i}"))
            await asyncio.sleep(0)
        while ledger.queue_depth or ledger.spool.sealed:
            await asyncio.sleep(0.01)  # every full file written and deleted
        print("rotated", len(list(Path(data_dir).glob("usage-spool-*"))), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    asyncio.run(main())
""")


async def test_files_rotate_and_an_inflight_call_survives_the_rotation(
    database: Database, db_url: str, tmp_path: Path
) -> None:
    """Full spool files are deleted once their rows are in the database; the provisional
    row of a call still running is carried into the new file, so a kill after the rotation
    still bills it."""
    db = database
    p = pfx()
    proc = _run_child(ROTATING_CHILD, db_url, tmp_path, p)
    assert proc.stdout is not None
    # Only the new file is left, holding the running call's provisional row.
    assert proc.stdout.readline().split() == ["rotated", "1"]
    assert await count(db, p) == 300
    await _kill(proc)
    await _replay(db, tmp_path)
    rows = await db.fetch(
        "SELECT status, error_code FROM usage_records WHERE request_id = ?", (f"{p}inflight",)
    )
    assert [tuple(r) for r in rows] == [(502, "gateway_interrupted")]
    assert await count(db, p) == 301
