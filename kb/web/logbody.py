"""Where an upload's log bytes go as they are read: a small plain log is kept whole and
analyzed in one piece (the fastest path for the common ~1 MB upload); a log that grows
past STREAM_AFTER, or that is gzip, is handed on a batch at a time to an UploadStream
(kb.services.streamupload) in a worker thread, so the request holds a batch, not the
body. Either way the memory is taken from the server's budget (kb.web.budget): while
kept whole, READ_ROOM per byte; once streaming, a fixed STREAM_ROOM plus the compressed
log as it grows."""

from __future__ import annotations

from functools import partial

import anyio.to_thread
from litestar.datastructures import State

from kb.core.textlog import GZIP_MAGIC
from kb.services.errors import TooLarge
from kb.services.streamupload import StreamedLog, UploadStream
from kb.web.budget import Reservation

MIB = 1024 * 1024
STREAM_AFTER = 4 * MIB  # a plain log up to this is analyzed whole
STREAM_BATCH = 1 * MIB  # raw bytes handed to a worker thread at once
# What a streamed upload holds besides its compressed log: a batch and its inflated
# pieces (textlog.INFLATE_STEP each), the sample before it is checked, the line the
# redactor holds (up to redactlog.MAX_PIECE), the analyzer's page and findings.
STREAM_ROOM = 24 * MIB
# per byte of a log kept whole: the growing buffer's spare room and the one copy made of
# it at the end (bench/bench_upload_memory.py)
READ_ROOM = 2


class LogBody:
    def __init__(self, state: State, limit: int, held: Reservation | None, *,
                 store: bool, stream: bool = True) -> None:
        self.state = state
        self.limit = limit
        self.held = held
        self.store = store
        self.may_stream = stream
        self.size = 0
        self._whole = bytearray()
        self._batch: list[bytes | bytearray] = []
        self._batched = 0
        self._stream: UploadStream | None = None
        self._compressed_taken = 0

    def too_large(self) -> TooLarge:
        return TooLarge(f"the upload is larger than {self.limit // MIB} MiB (KB_MAX_UPLOAD_MB)")

    async def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.size += len(chunk)
        if self.size > self.limit:
            raise self.too_large()
        if self._stream is None:
            if self.held is not None:
                await self.held.take(READ_ROOM * len(chunk))
            self._whole += chunk
            if self.may_stream and (len(self._whole) > STREAM_AFTER or self._whole[:2] == GZIP_MAGIC):
                await self._start_stream()
            return
        self._batch.append(chunk)
        self._batched += len(chunk)
        if self._batched >= STREAM_BATCH:
            await self._feed()

    async def end(self) -> bytes | StreamedLog:
        """The log: its bytes when kept whole, else what the stream made of it."""
        if self._stream is None:
            return bytes(self._whole)
        await self._feed()
        streamed = await self._run(self._stream.finish)
        self._stream = None
        return streamed

    async def _start_stream(self) -> None:
        if self.held is not None:
            await self.held.take(STREAM_ROOM)
        self._stream = UploadStream(self.limit, store=self.store)
        self._batch, self._batched = [self._whole], len(self._whole)  # fed without a copy
        self._whole = bytearray()
        await self._feed()

    async def _feed(self) -> None:
        if not self._batch or self._stream is None:
            return
        batch = self._batch[0] if len(self._batch) == 1 else b"".join(self._batch)
        self._batch, self._batched = [], 0
        await self._run(self._stream.feed, batch)
        grown = self._stream.compressed_size - self._compressed_taken
        if grown > 0 and self.held is not None:
            await self.held.take(grown)
            self._compressed_taken += grown

    async def _run(self, func, *args):  # type: ignore[no-untyped-def]
        return await anyio.to_thread.run_sync(partial(func, *args), limiter=self.state.get("limiter"))
