"""Entry point of the analysis core: raw log bytes in, `Analysis` out. No I/O.

`Analyzer` takes the log in chunks of any size (a 1 GB log never sits in memory: the
CLI feeds it 8 MB at a time), so memory stays bounded by what was found, not by the
log. `analyze(data)` is the one-shot form that the API and the tests use."""

from __future__ import annotations

import zlib

from kb.core import scan
from kb.core.context import ContextCollector
from kb.core.fingerprint import fingerprint
from kb.core.records import Analysis, Timing
from kb.core.redact import redact, redact_lines
from kb.core.rootcause import choose
from kb.core.split import parse_line
from kb.core.tracebacks import Extractor

GZIP_MAGIC = b"\x1f\x8b"
HEAD_LINES = 40  # parsed until the first timestamp, anchors or not
MAX_LINE = 64 * 1024  # longer lines are cut (a log line of megabytes is a dump, not a message)
TIME_LOOKBACK = 8  # lines looked back from a window for the time the log had reached
MAX_FOUND = 20_000  # bound on errors kept; beyond it only exceptions are kept
_INFLATE_STEP = 16 * 1024 * 1024


class Analyzer:
    """Streaming analyzer: `feed` chunks in order, then `finish`."""

    def __init__(self, *, secret_lines: bool = False) -> None:
        # With secret_lines, the lines that may hold a secret are collected from the
        # pre-filter's pass over the blocks fed as they are (see analyze_for_storage).
        self.secret_lines: list[tuple[int, int]] | None = [] if secret_lines else None
        self.secret_lines_complete = True  # False once a cut line left bytes unscanned
        self._carry = b""
        self._lines_before = 0  # lines fully consumed before the current block
        self._inflater: zlib._Decompress | None = None
        self._started = False
        self._extractor = Extractor()
        self._context = ContextCollector()
        self._redactions = 0
        self._bytes = 0
        self._notes: list[str] = []

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if not self._started:
            self._started = True
            if data[:2] == GZIP_MAGIC:
                self._inflater = zlib.decompressobj(wbits=47)
        if self._inflater is not None:
            self._inflate(data)
        else:
            self._take(data)

    def finish(self) -> Analysis:
        if self._inflater is not None:
            try:
                self._take(self._inflater.flush())
            except zlib.error:
                self._notes.append("gzip stream is corrupt; analysed what could be decompressed")
        if self._carry:
            last = self._carry + b"\n"
            self._block(last, 0, len(last), self._bytes - len(self._carry))
            self._carry = b""
        found = self._extractor.finish()
        root, symptoms = choose(found, self._extractor.last_info)
        all_frames = [frame for item in found for frame in item.event.frames]
        frames_text = " ".join(f.file for f in all_frames[-400:])
        context = self._context.build(root, frames_text, [f.file for f in (root.frames if root and root.frames else all_frames)])
        longest = max((item.event.frames for item in found), key=len, default=[])
        phase = self._context.phase(root, root.line_number if root else None, context.engine, longest)
        first, crash, seconds = self._context.seconds_to_crash(root.line_number if root else None)
        processes = sorted({p for p in self._extractor.streams if p})
        return Analysis(
            fingerprint=fingerprint(root, context.engine, phase),
            root_cause=root,
            symptoms=symptoms[:50],
            context=context,
            phase=phase,
            timing=Timing(first_timestamp=first, crash_timestamp=crash, seconds_to_crash=seconds),
            redactions=self._redactions,
            processes=processes[:200],
            lines=self._lines_before,
            bytes=self._bytes,
            notes=self._notes,
        )

    # ----------------------------------------------------------------------------------
    def _inflate(self, data: bytes) -> None:
        inflater = self._inflater
        assert inflater is not None
        try:
            chunk = inflater.decompress(data, _INFLATE_STEP)
            self._take(chunk)
            while inflater.unconsumed_tail:
                self._take(inflater.decompress(inflater.unconsumed_tail, _INFLATE_STEP))
        except zlib.error:
            if "gzip stream is corrupt; analysed what could be decompressed" not in self._notes:
                self._notes.append("gzip stream is corrupt; analysed what could be decompressed")

    def _take(self, data: bytes) -> None:
        """Consume whole lines of `data` without copying it (chunks are megabytes); the
        partial last line waits in `_carry` for the next chunk."""
        offset = self._bytes  # of data[0] in the (inflated) log
        self._bytes += len(data)
        begin = 0
        if self._carry:
            newline = data.find(b"\n")
            if newline < 0:
                self._carry += data
                if len(self._carry) > MAX_LINE * 4:  # one endless line: cut it
                    self._cut_carry(self._bytes - len(self._carry))
                return
            head = self._carry + data[:newline + 1]
            self._block(head, 0, len(head), offset - len(self._carry))
            self._carry = b""
            begin = newline + 1
        cut = data.rfind(b"\n") + 1
        if cut <= begin:
            self._carry = data[begin:]
            if len(self._carry) > MAX_LINE * 4:
                self._cut_carry(offset + begin)
            return
        self._carry = data[cut:]
        self._block(data, begin, cut, offset)

    def _cut_carry(self, offset: int) -> None:
        """Parse the start of an endless line and drop the rest (unscanned)."""
        self._block(self._carry[:MAX_LINE] + b"\n", 0, MAX_LINE + 1, offset)
        self._carry = b""
        self.secret_lines_complete = False

    def _block(self, block: bytes, begin: int, end: int, offset: int) -> None:
        """Parse the lines worth parsing in block[begin:end] (whole lines); block[0] is
        at `offset` in the log."""
        # The lines that may hold a secret (a redaction literal is in their bytes): only
        # they are run through the redaction rules. Without hyperscan, every line is.
        secrets: list[tuple[int, int]] | None = [] if scan.hyperscan is not None else None
        ranges = scan.windows(block, begin, end, secrets)
        if secrets and self.secret_lines is not None:
            self.secret_lines += [(offset + start, offset + stop) for start, stop in secrets]
        marked = None if secrets is None else {start for start, _ in secrets}
        if self._lines_before < HEAD_LINES and self._context.first_timestamp is None:
            # The head is parsed up to its first timestamp (where the time to crash
            # starts); the lines with anything else worth parsing have anchors.
            head_end, number = begin, self._lines_before
            while number < HEAD_LINES and self._context.first_timestamp is None:
                nxt = block.find(b"\n", head_end, end)
                stop = end if nxt < 0 else nxt + 1
                number += 1
                self._line(number, block[head_end:stop].rstrip(b"\n"), marked is None or head_end in marked)
                head_end = stop
                if stop >= end:
                    break
            ranges = [(max(start, head_end), stop) for start, stop in ranges if stop > head_end]
            self._lines_before = number
            begin = head_end
        position, line_number = begin, self._lines_before
        for start, stop in ranges:
            line_number += block.count(b"\n", position, start)
            self._time_before(block, position, start, line_number)
            position = start
            for raw in block[start:stop].split(b"\n"):
                if position >= stop:
                    break
                line_number += 1
                self._line(line_number, raw, marked is None or position in marked)
                position += len(raw) + 1
        self._lines_before = line_number + block.count(b"\n", position, end)

    def _time_before(self, block: bytes, floor: int, start: int, number: int) -> None:
        """Note the time of the nearest timestamped line before a window (up to
        TIME_LOOKBACK lines back, not before `floor`): the lines the pre-filter skips
        still tell when the log got there, and the time to crash needs the last time
        before the crash (a request logged just before it), not the last parsed one."""
        end = start
        for _ in range(TIME_LOOKBACK):
            if end <= floor:
                return
            line_start = block.rfind(b"\n", floor, end - 1) + 1 or floor
            raw = block[line_start:min(end - 1, line_start + MAX_LINE)]
            timestamp = parse_line(number, raw.decode("utf-8", "replace")).timestamp
            if timestamp:
                self._context.note_time(number, timestamp)
                return
            end, number = line_start, number - 1

    def _line(self, number: int, raw: bytes, may_hold_secret: bool) -> None:
        if len(raw) > MAX_LINE:
            raw = raw[:MAX_LINE]
        text = raw.decode("utf-8", "replace")
        if "\x00" in text:  # a NUL may have split a literal the pre-filter looks for
            text = text.replace("\x00", "")
            may_hold_secret = True
        if may_hold_secret:
            text, count = redact(text)
            self._redactions += count
        line = parse_line(number, text)
        if len(self._extractor.found) < MAX_FOUND or line.level not in ("ERROR", "CRITICAL"):
            self._extractor.feed(line)
        self._context.feed(line)


def analyze(data: bytes) -> Analysis:
    """Analyze a whole log held in memory (plain text or gzip). Never raises on any bytes."""
    analyzer = Analyzer()
    analyzer.feed(data)
    return analyzer.finish()


def analyze_for_storage(data: bytes) -> tuple[Analysis, bytes, int]:
    """`analyze` and `redacted_log` of a plain-text log (NUL bytes already removed, as
    the service prepares uploads) with one pre-filter pass instead of two: the pass
    that picks the lines to parse also marks the lines that may hold a secret."""
    analyzer = Analyzer(secret_lines=True)
    analyzer.feed(data)
    analysis = analyzer.finish()
    if (data[:2] == GZIP_MAGIC or b"\x00" in data or scan.hyperscan is None
            or not analyzer.secret_lines_complete):
        stored, redactions = redacted_log(data)
        return analysis, stored, redactions
    size = len(data)  # a last line without a newline was scanned with one added
    lines = [(start, min(stop, size)) for start, stop in analyzer.secret_lines or ()]
    stored, redactions = _redacted(data, lines)
    return analysis, stored, redactions


def inflate(data: bytes) -> bytes:
    """The log's bytes: gzip inflated (what can be), anything else as it is."""
    if data[:2] == GZIP_MAGIC:
        try:
            return zlib.decompressobj(wbits=47).decompress(data)
        except zlib.error:
            return data
    return data


def redacted_log(data: bytes) -> tuple[bytes, int]:
    """The log to store, as UTF-8 bytes with every secret masked (count returned). Only
    the lines the pre-filter flags are decoded and run the rules; the rest is copied as
    bytes, so a megabyte log costs well under a millisecond."""
    raw = inflate(data)
    if b"\x00" in raw:
        raw = raw.replace(b"\x00", b"")
    lines = scan.secret_lines(raw)
    if lines is None:
        text, total = redact_lines(raw.decode("utf-8", "replace"))
        return text.encode("utf-8"), total
    return _redacted(raw, lines)


def _redacted(raw: bytes, lines: list[tuple[int, int]]) -> tuple[bytes, int]:
    """`raw` with the secrets of the given lines masked, as valid UTF-8."""
    pieces: list[bytes] = []
    total, position = 0, 0
    for start, end in lines:
        pieces.append(raw[position:start])
        text, count = redact(raw[start:end].decode("utf-8", "replace"))
        pieces.append(text.encode("utf-8") if count else raw[start:end])
        total += count
        position = end
    pieces.append(raw[position:])
    out = b"".join(pieces) if len(pieces) > 1 else raw
    if not out.isascii():  # ASCII is valid UTF-8: no decoding (and no 1 MB str) needed
        try:
            out.decode("utf-8")  # a stored log is always valid UTF-8
        except UnicodeDecodeError:
            out = out.decode("utf-8", "replace").encode("utf-8")
    return out, total
