"""`kb serve --workers N` runs N processes under uvicorn's supervisor. Killed with -9, the
supervisor cannot stop them: they would keep serving as orphans and hold the port, so a
restart fails with "Address already in use". Each worker therefore asks the kernel for
SIGTERM when its parent dies (Linux prctl PR_SET_PDEATHSIG), and checks once that the
parent is not gone already (the race before the call)."""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys

log = logging.getLogger("kb.web")
PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """In a worker process (one multiprocessing started), die when the supervisor does.
    True when the kernel took the request. A lone `kb serve` is nobody's worker: it
    outlives its shell as any server does."""
    if multiprocessing.parent_process() is None or not sys.platform.startswith("linux"):
        return False
    parent = multiprocessing.parent_process().pid
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the supervisor died before the request: follow it now
        log.warning("the kb serve supervisor is gone; this worker stops")
        os.kill(os.getpid(), signal.SIGTERM)
    return True
