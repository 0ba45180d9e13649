"""An upload analyzed as it arrives: the body's chunks are checked and gunzipped
(kb.core.textlog.TextStream), fed to the streaming analyzer (kb.core.analyze.Analyzer),
redacted line by line (kb.core.redactlog.LogRedactor) and zstd-compressed, a chunk at a
time. One upload then holds a chunk, the analyzer's findings and the compressed log,
never the log itself: a 200 MB upload costs megabytes, not three copies of it.

The service takes this path for a body that is large or gzip (kb.web.logbody); a small
plain body is analyzed whole (kb.services.ingest.prepare_upload), with the same answer.
Not thread-safe: one request feeds it, one chunk after the other (in worker threads)."""

from __future__ import annotations

from dataclasses import dataclass

import zstandard

from kb.core import textlog
from kb.core.analyze import Analyzer
from kb.core.records import Analysis
from kb.core.redactlog import LogRedactor
from kb.db.logcodec import ZSTD_LEVEL
from kb.services.errors import InvalidInput, NotText, TooLarge


FEED_STEP = 1 << 20  # raw bytes checked, analyzed, redacted and compressed at a time


@dataclass(slots=True)
class StreamedLog:
    """What a streamed upload leaves: its analysis and, when it is to be stored, its
    redacted log compressed (with the stored size and how many secrets were masked)."""

    analysis: Analysis
    log_compressed: bytes | None
    log_bytes: int
    redactions: int


def _service_error(exc: textlog.LogRejected) -> Exception:
    if isinstance(exc, textlog.EmptyLog):
        return InvalidInput(str(exc))
    if isinstance(exc, textlog.LogTooLarge):
        return TooLarge(str(exc))
    return NotText(str(exc))


class UploadStream:
    def __init__(self, max_bytes: int, *, store: bool) -> None:
        self._text = textlog.TextStream(max_bytes)
        self._analyzer = Analyzer()
        self._redactor = LogRedactor() if store else None
        self._compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj() if store else None
        self._compressed: list[bytes] = []
        self.compressed_size = 0
        self._stored = 0

    def feed(self, data: bytes | bytearray) -> None:
        """Take the next raw bytes of the body, FEED_STEP at a time (each step's copies
        are freed before the next). Raises the service errors that map to 400/413/422
        as soon as the log shows it is refused."""
        view = memoryview(data)
        try:
            for start in range(0, len(view), FEED_STEP):
                for piece in self._text.feed(bytes(view[start:start + FEED_STEP])):
                    self._take(piece)  # one inflated piece at a time
        except textlog.LogRejected as exc:
            raise _service_error(exc) from None

    def finish(self) -> StreamedLog:
        try:
            pieces = self._text.finish()
        except textlog.LogRejected as exc:
            raise _service_error(exc) from None
        for piece in pieces:
            self._take(piece)
        analysis = self._analyzer.finish()
        if self._redactor is None or self._compressor is None:
            return StreamedLog(analysis, None, 0, 0)
        self._store(self._redactor.finish())
        self._compressed.append(self._compressor.flush())
        blob = b"".join(self._compressed)
        self._compressed.clear()
        return StreamedLog(analysis, blob, self._stored, self._redactor.redactions)

    def _take(self, text: bytes) -> None:
        self._analyzer.feed(text)
        if self._redactor is not None:
            self._store(self._redactor.feed(text))

    def _store(self, redacted: bytes) -> None:
        if not redacted or self._compressor is None:
            return
        self._stored += len(redacted)
        out = self._compressor.compress(redacted)
        if out:
            self._compressed.append(out)
            self.compressed_size += len(out)
