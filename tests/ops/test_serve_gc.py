"""A serving process freezes its startup heap, collects the young generation less often and
hands the GIL back to the event loop sooner; checked in a child process so this test
run's own settings are untouched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gateway.server.process import GC_GEN0_THRESHOLD, SWITCH_INTERVAL_S

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import gc, sys
from gateway.server.process import freeze_startup_heap
before = gc.get_threshold()
freeze_startup_heap()
after = gc.get_threshold()
print(before[0], after[0], after[1:] == before[1:], gc.get_freeze_count() > 0,
      sys.getswitchinterval())
"""


def test_serving_process_freezes_its_heap_and_raises_the_young_threshold() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert out == ["700", str(GC_GEN0_THRESHOLD), "True", "True", str(SWITCH_INTERVAL_S)]
