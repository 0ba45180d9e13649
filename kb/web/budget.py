"""A server-wide bound on the memory upload bodies take: every byte of a body read into
memory, and the room its analysis needs (a gzip body may inflate to the upload limit),
is taken from one budget (KB_MAX_INFLIGHT_MB) and given back when the request ends. A
request that finds the budget spent waits (KB_UPLOAD_QUEUE_SECONDS), then gets 503 with
Retry-After: concurrent large uploads queue instead of taking the server's memory."""

from __future__ import annotations

import ctypes
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from kb.services.errors import Unavailable


class ByteBudget:
    def __init__(self, total: int, wait: float) -> None:
        self.total = total
        self.wait = wait
        self.used = 0
        self.released = 0  # given back since the last trim (give_memory_back)
        self._changed = anyio.Condition()

    @asynccontextmanager
    async def reservation(self) -> AsyncIterator[Reservation]:
        held = Reservation(self)
        try:
            yield held
        finally:
            await held.release()


class Reservation:
    """What one request holds of the budget."""

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self.held = 0
        self.credit = 0  # taken ahead (reserve), spent by later takes

    async def reserve(self, size: int) -> None:
        """Take what the whole request will need at once, when it is known (a body's
        Content-Length): requests are admitted whole or wait, so two half-read bodies
        never hold the budget between them while each waits for the rest."""
        before = self.held
        await self.take(size)
        self.credit += self.held - before

    async def take(self, size: int) -> None:
        """Wait until `size` more bytes fit (a request alone may hold the whole budget,
        even if it needs more), or raise Unavailable after the budget's wait."""
        if self.credit:
            spent = min(self.credit, size)
            self.credit -= spent
            size -= spent
        budget = self.budget
        size = min(size, budget.total - self.held)  # alone, it may hold the whole budget
        if size <= 0:
            return
        with anyio.move_on_after(budget.wait) as waited:
            async with budget._changed:
                while budget.used + size > budget.total:
                    await budget._changed.wait()
                budget.used += size
                self.held += size
        if waited.cancelled_caught:
            raise Unavailable("the service holds as many uploads in memory as it may "
                              "(KB_MAX_INFLIGHT_MB); retry later")

    async def release(self) -> None:
        if not self.held:
            return
        held = self.held
        budget = self.budget
        async with budget._changed:
            budget.used -= self.held
            budget.released += self.held
            self.held = 0
            budget._changed.notify_all()
        # Trimmed after a large upload, or when the last of many smaller ones (streamed
        # uploads hold a few MiB each) is done.
        if held >= TRIM_AFTER or (budget.released >= TRIM_AFTER and budget.used == 0):
            budget.released = 0
            give_memory_back()


TRIM_AFTER = 64 << 20


M_MMAP_THRESHOLD = -3


def map_large_buffers() -> None:
    """Make glibc serve every buffer of MMAP_THRESHOLD or more from its own mapping, given
    back to the system when freed. By default the threshold grows with the buffers freed
    (up to 32 MiB), and then the megabyte batches of streamed uploads, made in many worker
    threads, pile up in per-thread arenas the process keeps (Linux/glibc only)."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):
        pass


MMAP_THRESHOLD = 1 << 20


def give_memory_back() -> None:
    """Large buffers freed in worker threads stay in glibc's per-thread arenas; trimming
    returns them to the system, so the service goes back near its baseline after large
    uploads instead of keeping their peak (Linux/glibc only, a no-op elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
