"""Redaction of whole logs, as bytes: what the service stores and the client sends.

Only the lines the pre-filter flags (kb.core.scan.secret_lines: one pass of C code) and
the lines of an open PEM block are decoded and run the rules (kb.core.redact); the rest
is copied as bytes, so a megabyte log costs well under a millisecond. `LogRedactor` does
the same on a stream of chunks of any size, with memory bounded by the longest line it
keeps whole (MAX_PIECE): the client redacts logs of gigabytes with it."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from kb.core import scan
from kb.core.redact import Redactor
from kb.core.textlog import GZIP_MAGIC

MAX_PIECE = 4 * 1024 * 1024  # a line longer than this is redacted in pieces (a dump, not a message)


def inflate(data: bytes) -> bytes:
    """The log's bytes: gzip inflated (what can be), anything else as it is."""
    if data[:2] == GZIP_MAGIC:
        try:
            return zlib.decompressobj(wbits=47).decompress(data)
        except zlib.error:
            return data
    return data


def redacted_log(data: bytes) -> tuple[bytes, int]:
    """The log to store, as UTF-8 bytes with every secret masked (count returned)."""
    raw = inflate(data)
    if b"\x00" in raw:
        raw = raw.replace(b"\x00", b"")
    return redacted(raw, scan.secret_lines(raw))


def redacted(raw: bytes, lines: list[tuple[int, int]], redactor: Redactor | None = None,
             utf8: bool = True) -> tuple[bytes, int]:
    """`raw` with the secrets of the given (flagged) lines masked, as valid UTF-8 (with
    `utf8`; else the bytes of the other lines stay exactly as they are). Lines that
    follow an opened PEM block are fed to the redactor too, flagged or not; `redactor`
    carries that state from the previous piece of a stream."""
    redactor = redactor or Redactor()
    pieces: list[bytes] = []
    total, position, index, size = 0, 0, 0, len(raw)
    following = 0  # where the line after the last one fed starts
    while True:
        if redactor.open:
            start = following
        else:
            while index < len(lines) and lines[index][0] < following:
                index += 1  # fed already, inside a PEM block
            if index == len(lines):
                break
            start = lines[index][0]
        if start >= size:
            break
        newline = raw.find(b"\n", start)
        end = size if newline < 0 else newline
        text, count = redactor.line(raw[start:end].decode("utf-8", "replace"))
        pieces.append(raw[position:start])
        pieces.append(text.encode("utf-8"))
        total += count
        position, following = end, end + 1
    if not pieces:
        out = raw
    else:
        pieces.append(raw[position:])
        out = b"".join(pieces)
    if utf8 and not out.isascii():  # ASCII is valid UTF-8: no decoding (and no 1 MB str) needed
        try:
            out.decode("utf-8")  # a stored log is always valid UTF-8
        except UnicodeDecodeError:
            out = out.decode("utf-8", "replace").encode("utf-8")
    return out, total


class LogRedactor:
    """Redact a log fed in chunks of any size: `feed` returns the redacted bytes of the
    whole lines so far, `finish` the rest. The output is the same however the log is cut
    (it equals `redacted_log` of the whole, but for lines longer than MAX_PIECE), and
    memory holds one line at most. With `exact`, what is not redacted stays byte for byte
    (NUL bytes and invalid UTF-8 too: the client sends a log as it is, for the service
    to judge), else the output is the stored form."""

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact
        self._rest = b""
        self._redactor = Redactor()
        self.redactions = 0

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        data = self._rest + data if self._rest else data
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) > MAX_PIECE:
            cut = len(data)  # a line that never ends: in pieces
        self._rest = data[cut:]
        return self._redact(data[:cut]) if cut else b""

    def finish(self) -> bytes:
        rest, self._rest = self._rest, b""
        return self._redact(rest) if rest else b""

    def _redact(self, block: bytes) -> bytes:
        if not self.exact and b"\x00" in block:
            block = block.replace(b"\x00", b"")
        out, count = redacted(block, scan.secret_lines(block), self._redactor, utf8=not self.exact)
        self.redactions += count
        return out


def redact_chunks(chunks: Iterable[bytes], exact: bool = True) -> Iterator[bytes]:
    """The redacted log of a stream of chunks (`exact`: see LogRedactor); a gzip log is
    inflated on the way (the output is plain text), at most INFLATE_STEP bytes at a time."""
    redactor = LogRedactor(exact)
    gunzip: _Gunzip | None = None
    started = False
    for chunk in chunks:
        if not chunk:
            continue
        if not started:
            started = True
            if chunk[:2] == GZIP_MAGIC:
                gunzip = _Gunzip()
        for piece in (gunzip.decompress(chunk) if gunzip is not None else (chunk,)):
            out = redactor.feed(piece)
            if out:
                yield out
    out = redactor.finish()
    if out:
        yield out


INFLATE_STEP = 16 * 1024 * 1024


class _Gunzip:
    """A (possibly multi-member) gzip stream inflated chunk by chunk; a corrupt or
    truncated stream gives what could be inflated, as the service does."""

    def __init__(self) -> None:
        self._inflater: zlib._Decompress | None = zlib.decompressobj(wbits=31)

    def decompress(self, chunk: bytes) -> Iterator[bytes]:
        while chunk and self._inflater is not None:
            try:
                yield self._inflater.decompress(chunk, INFLATE_STEP)
            except zlib.error:
                self._inflater = None
                return
            if self._inflater.unconsumed_tail:
                chunk = self._inflater.unconsumed_tail
                continue
            if not self._inflater.eof:
                return
            chunk = self._inflater.unused_data.lstrip(b"\x00")
            self._inflater = zlib.decompressobj(wbits=31) if chunk.startswith(GZIP_MAGIC) or not chunk else None
