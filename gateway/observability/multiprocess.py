"""prometheus_client's multiprocess mode for ``syntic serve --workers N``.

The supervisor makes a fresh directory per server run and puts it in
``PROMETHEUS_MULTIPROC_DIR`` before uvicorn spawns the workers: prometheus_client picks
its file-backed values when a worker first imports it, and each worker writes its own
``<type>_<pid>.db`` files there. The directory is removed when the server stops, so a
restart starts from zero instead of resurrecting old counts.

A worker that stops leaves its counters and histograms in the merge (they stay counted)
and takes its live gauges out of it (``mark_process_dead``): on a clean exit itself, and
after a crash the surviving workers notice its pid is gone.

Example (what ``syntic serve`` does)::

    with worker_metrics_dir(os.environ):
        uvicorn.run("gateway.app:create_app_from_env", factory=True, workers=2)
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
from collections.abc import Iterator, MutableMapping

ENV = "PROMETHEUS_MULTIPROC_DIR"

# prometheus_client is imported inside the functions below, never at module level:
# ``syntic serve`` imports this module and must settle ENV before prometheus_client loads.


@contextlib.contextmanager
def worker_metrics_dir(environ: MutableMapping[str, str]) -> Iterator[str]:
    """A fresh, empty directory in ``environ[ENV]`` for as long as the server runs."""
    path = tempfile.mkdtemp(prefix="syntic-metrics-")
    environ[ENV] = path
    try:
        yield path
    finally:
        environ.pop(ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def worker_exited(path: str) -> None:
    """This worker stops serving: its live gauges leave the merge."""
    from prometheus_client.multiprocess import mark_process_dead  # not at module level: see ENV

    mark_process_dead(os.getpid(), path)  # type: ignore[no-untyped-call]


def forget_dead_workers(path: str) -> None:
    """Take the live gauges of workers that are gone (a crash, a kill) out of the merge."""
    from prometheus_client.multiprocess import mark_process_dead  # not at module level: see ENV

    pids: set[int] = set()
    for name in glob.glob(os.path.join(path, "gauge_live*_*.db")):
        tail = os.path.basename(name)[: -len(".db")].rsplit("_", 1)[-1]
        if tail.isdigit():
            pids.add(int(tail))
    for pid in pids - {os.getpid()}:
        if not _alive(pid):
            # Another worker may be removing the same files right now.
            with contextlib.suppress(FileNotFoundError):
                mark_process_dead(pid, path)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
