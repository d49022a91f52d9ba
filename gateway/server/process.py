"""Process tuning for a serving process: the startup heap frozen, GC and GIL settings.

Called once per serving process: by ``syntic serve`` for one worker, by
``gateway.app.create_app_from_env`` in each of ``--workers N``. The figures behind each
setting are in ``docs/performance.md``.

Example::

    app = create_app(settings)
    freeze_startup_heap()
"""

from __future__ import annotations

import gc
import logging
import os
import sys

log = logging.getLogger("syntic.serve")

# The young generation is collected every GC_GEN0_THRESHOLD allocations instead of
# Python's 700: a request allocates a few hundred objects, nearly all freed by
# refcounting, so the default ran a collection every few requests for little.
GC_GEN0_THRESHOLD = 10_000
# A worker thread (a new schema's lint, the ledger's writes) holds the GIL for up to the
# switch interval before the event loop gets it back: a short one bounds how long such a
# turn delays every request in flight.
SWITCH_INTERVAL_S = 0.001


def freeze_startup_heap() -> None:
    """Move everything allocated so far (modules, settings, the app) out of the cyclic
    GC's reach, so that a full collection walks only what requests allocate; then set
    the young-generation GC threshold and the GIL switch interval for serving."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    log.info("startup heap frozen: %d objects (pid %d)", gc.get_freeze_count(), os.getpid())
