"""A small filesystem of its own (a tmpfs) that a test can fill: a full disk on demand.

    with SmallDisk(tmp_path / "disk", size_kib=512) as disk:   # skips without CAP_SYS_ADMIN
        ... give disk.path to a gateway as SYNTIC_DATA_DIR ...
        disk.fill()        # every byte taken: a new write gets ENOSPC
        disk.free()        # room again

Mounting a tmpfs needs root (CAP_SYS_ADMIN), which the CI container has; elsewhere the test
is skipped with that reason. ``fill`` writes a filler file page by page until the kernel
refuses, then ``free`` deletes it. A file already open on the disk may still append up to
the end of its last page (a tmpfs allocates whole pages), so a writer sees the disk full
within a page of its own data, not at an exact byte.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

_PAGE = 4096


class SmallDisk:
    """A ``size_kib`` tmpfs mounted at ``path`` for the duration of the ``with``."""

    def __init__(self, path: Path, *, size_kib: int = 512) -> None:
        self.path = path
        self.size_kib = size_kib
        self._filler = path / "filler.bin"
        self._mounted = False

    def __enter__(self) -> SmallDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        out = subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={self.size_kib}k,mode=0700",
                "tmpfs",
                str(self.path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs (needs CAP_SYS_ADMIN): {out.stderr.strip()}")
        self._mounted = True
        return self

    def fill(self) -> int:
        """Take every free byte (returns how many were written)."""
        written = 0
        chunk = b"\0" * (64 * 1024)
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (len(chunk), _PAGE, 1):
                while True:
                    try:
                        n = os.write(fd, chunk[:size])
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
                    written += n
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        self._filler.unlink(missing_ok=True)

    def __exit__(self, *exc: object) -> None:
        if self._mounted:
            # lazily: a process that still holds a file there must not fail the test
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)
            self._mounted = False
