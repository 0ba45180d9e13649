"""Is this a text log? One check for every way a log arrives (upload, `kb analyze`,
`kb submit`, the Python API), so an empty, binary or oversized log gets the same
message everywhere. Pure: bytes in, text bytes out or a `LogRejected` saying why."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

GZIP_MAGIC = b"\x1f\x8b"
MIB = 1024 * 1024

# Magic numbers of things people upload by mistake: named in the message.
_BINARY_MAGIC = (
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"),
    (b"\x7fELF", "an ELF binary (a core dump?)"),
    (b"SQLite format 3", "an SQLite database"),
)
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))
SAMPLE = 64 * 1024
INFLATE_STEP = 1 << 20


class LogRejected(ValueError):
    """The input is not a log this tool can read; the message says why."""


class EmptyLog(LogRejected):
    pass


class LogTooLarge(LogRejected):
    pass


class NotTextLog(LogRejected):
    pass


def too_large(max_bytes: int, where: str = "") -> LogTooLarge:
    return LogTooLarge(f"the log is larger than {max_bytes // MIB} MiB{where} (KB_MAX_UPLOAD_MB)")


def gunzip(data: bytes, max_bytes: int) -> bytes:
    """Decompress a (possibly multi-member) gzip log, refusing more than max_bytes of
    output (a 1 MB gzip can expand to gigabytes)."""
    out = bytearray()
    remaining = data
    try:
        while remaining:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            pending = remaining
            while pending and not inflater.eof:  # a step at a time: no second copy of the whole
                out += inflater.decompress(pending, INFLATE_STEP)
                if len(out) > max_bytes:
                    # freed now: the traceback keeps this frame alive until the next
                    # garbage collection, and a bomb's output is the upload limit
                    out.clear()
                    raise too_large(max_bytes, " once decompressed")
                pending = inflater.unconsumed_tail
            if not inflater.eof:
                raise NotTextLog("the gzip stream is truncated")
            remaining = inflater.unused_data.lstrip(b"\x00")
            if remaining and not remaining.startswith(GZIP_MAGIC):
                break  # trailing garbage after the last member: keep what we have
    except zlib.error as exc:
        raise NotTextLog(f"the log looks gzip-compressed but does not decompress: {exc}") from None
    return bytes(out)


def check_sample(sample: bytes) -> None:
    """Refuse a log whose first bytes (decompressed) show it is not text at all."""
    for magic, what in _BINARY_MAGIC:
        if sample.startswith(magic):
            raise NotTextLog(f"the input is {what}, not a text log (give the log file itself, "
                             f"plain or gzip-compressed)")
    sample = sample[:SAMPLE]
    nul = sample.find(b"\x00")
    if nul >= 0:
        raise NotTextLog(f"the input is binary, not a text log (NUL byte at offset {nul})")
    controls = len(sample) - len(sample.translate(None, _CONTROL))
    if controls > len(sample) * 0.05:
        raise NotTextLog("the input is binary, not a text log (too many control bytes)")
    invalid = len(sample.decode("utf-8", "replace").encode("utf-8")) - len(sample)
    if invalid > len(sample) * 0.30:
        raise NotTextLog("the input is not UTF-8 text")


def is_blank(data: bytes) -> bool:
    # isspace stops at the first other byte; strip would copy
    return not data or data.isspace()


def prepare_log(data: bytes, max_bytes: int) -> bytes:
    """The log as text bytes: gunzipped, UTF-16 turned into UTF-8, and refused with a
    reason when it is empty, too large or not text at all."""
    if is_blank(data):
        raise EmptyLog("the log is empty")
    if len(data) > max_bytes:
        raise too_large(max_bytes)
    if data.startswith(GZIP_MAGIC):
        data = gunzip(data, max_bytes)
        if is_blank(data):
            raise EmptyLog("the log is empty once decompressed")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            raise NotTextLog("the log starts with a UTF-16 byte-order mark but is not UTF-16") from None
    check_sample(data[:SAMPLE])
    if b"\x00" in data:  # a few stray NULs past the sample: text stores cannot hold them
        data = data.replace(b"\x00", b"")
    return data


def check_head(head: bytes, *, complete: bool) -> None:
    """Refuse a log from its first bytes alone (a stream, a file not read whole):
    `complete` says `head` is the whole input. Empty when that whole is blank (once
    decompressed, for gzip); otherwise what `check_sample` refuses."""
    whole = complete
    if head.startswith(GZIP_MAGIC):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            sample = inflater.decompress(head, SAMPLE)
        except zlib.error as exc:
            raise NotTextLog(f"the log looks gzip-compressed but does not decompress: {exc}") from None
        whole = complete and inflater.eof and not inflater.unused_data.strip(b"\x00")
    elif head.startswith((b"\xff\xfe", b"\xfe\xff")):
        sample = head[:SAMPLE].decode("utf-16", "replace").encode("utf-8")
    else:
        sample = head
    if is_blank(sample):
        if whole:
            raise EmptyLog("the log is empty" + (" once decompressed" if sample is not head else ""))
        return
    check_sample(sample)


class GunzipStream:
    """`gunzip` on a stream: a (possibly multi-member) gzip log inflated chunk by chunk,
    at most INFLATE_STEP bytes at a time, refusing more than max_bytes of output, with
    the same errors and the same leniency (NUL padding between members, trailing
    garbage after the last one ignored)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._inflater: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._between = b""  # after a member: what may start the next one
        self._done = False  # trailing garbage seen: the rest is ignored

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The inflated pieces of `data`, made as they are asked for: a bomb's chunk is
        never inflated whole before its first piece is looked at."""
        try:
            while data and not self._done:
                if self._inflater is None:  # between members
                    data = (self._between + data).lstrip(b"\x00")
                    self._between = b""
                    if len(data) < 2:
                        self._between = data
                        break
                    if not data.startswith(GZIP_MAGIC):
                        self._done = True
                        break
                    self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                inflater = self._inflater
                while data and not inflater.eof:
                    piece = inflater.decompress(data, INFLATE_STEP)
                    self.size += len(piece)
                    if self.size > self.max_bytes:
                        raise too_large(self.max_bytes, " once decompressed")
                    data = inflater.unconsumed_tail
                    if piece:
                        yield piece
                if inflater.eof:
                    data = inflater.unused_data
                    self._inflater = None
        except zlib.error as exc:
            raise NotTextLog(f"the log looks gzip-compressed but does not decompress: {exc}") from None

    def finish(self) -> None:
        if self._inflater is not None:
            raise NotTextLog("the gzip stream is truncated")


class TextStream:
    """`prepare_log` on a stream: `feed` raw chunks of an upload, get back the text bytes
    to analyze (gunzipped, UTF-16 turned into UTF-8, NUL bytes removed), refused with the
    same reasons when empty, too large or not text. The first SAMPLE bytes are held until
    they are checked; nothing else is kept, so memory is bounded by a chunk, not the log.
    (A log both binary and too large may be refused as binary here, before the whole is
    inflated.)"""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.raw_size = 0
        self._start = b""  # the first raw bytes, until the gzip magic can be told
        self._gunzip: GunzipStream | None = None
        self._started = False
        self._raw_blank = True
        self._text_blank = True
        self._decoder: Any = None  # UTF-16 to text, when the text starts with a BOM
        self._head: bytearray | None = bytearray()  # the sample, until checked

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The text of `data`, piece by piece as it is asked for (checked, inflated and
        converted lazily: iterate it to the end before the next feed)."""
        self.raw_size += len(data)
        if self.raw_size > self.max_bytes:
            raise too_large(self.max_bytes)
        if self._raw_blank and data and not data.isspace():
            self._raw_blank = False
        if not self._started:
            self._start += data
            if len(self._start) < 2:
                return iter(())
            data, self._start, self._started = self._start, b"", True
            if data.startswith(GZIP_MAGIC):
                self._gunzip = GunzipStream(self.max_bytes)
        pieces = self._gunzip.feed(data) if self._gunzip is not None else (data,)
        return (out for piece in pieces if (out := self._text(piece)))

    def finish(self) -> list[bytes]:
        out: list[bytes] = []
        if not self._started and self._start:  # a one-byte log
            data, self._start, self._started = self._start, b"", True
            out.append(self._text(data))
        if self._raw_blank:
            raise EmptyLog("the log is empty")
        if self._gunzip is not None:
            self._gunzip.finish()
            if self._text_blank:
                raise EmptyLog("the log is empty once decompressed")
        if self._decoder is not None:
            out.append(self._converted(b"", final=True))
        if self._head is not None:
            out.append(self._checked())
        return [piece for piece in out if piece]

    def _text(self, piece: bytes) -> bytes:
        if self._text_blank and piece and not piece.isspace():
            self._text_blank = False
        if self._head is not None and not self._head and self._decoder is None \
                and piece.startswith((b"\xff\xfe", b"\xfe\xff")):
            import codecs

            self._decoder = codecs.getincrementaldecoder("utf-16")("strict")
        if self._decoder is not None:
            piece = self._converted(piece)
        if self._head is not None:
            self._head += piece
            if len(self._head) < SAMPLE:
                return b""
            return self._checked()
        return piece.replace(b"\x00", b"") if b"\x00" in piece else piece

    def _converted(self, piece: bytes, final: bool = False) -> bytes:
        try:
            return self._decoder.decode(piece, final).encode("utf-8")  # type: ignore[no-any-return]
        except UnicodeDecodeError:
            raise NotTextLog("the log starts with a UTF-16 byte-order mark but is not UTF-16") from None

    def _checked(self) -> bytes:
        assert self._head is not None
        head, self._head = bytes(self._head), None
        check_sample(head[:SAMPLE])
        return head.replace(b"\x00", b"") if b"\x00" in head else head
