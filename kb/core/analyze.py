"""Entry point of the analysis core: raw log bytes in, `Analysis` out. No I/O.

`Analyzer` takes the log in chunks of any size (a 1 GB log never sits in memory: the
CLI feeds it 16 MB at a time), so memory stays bounded by what was found, not by the
log. `analyze(data)` is the one-shot form that the API and the tests use."""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import replace

from kb.core import scan
from kb.core.capture import Peeled, Profile, peel, unglued
from kb.core.context import ContextCollector
from kb.core.fingerprint import fingerprint
from kb.core.order import newest_first
from kb.core.patterns import starts_record
from kb.core.records import Analysis, ErrorEvent, Timing
from kb.core.redact import Redactor
from kb.core.redactlog import inflate, redacted, redacted_log  # noqa: F401 - inflate, redacted_log: this module's API
from kb.core.rejoin import Rejoiner
from kb.core.rootcause import choose, log_ends_early, native_stack_only, not_captured, unstated_error
from kb.core.scan import WARNING_LINES_KEPT
from kb.core.split import LogLine, parse_line
from kb.core.textlog import GZIP_MAGIC
from kb.core.tracebacks import Extractor, Found, _key_label

HEAD_LINES = 40  # parsed until the first timestamp, anchors or not
MAX_LINE = 64 * 1024  # longer lines are cut (a log line of megabytes is a dump, not a message)
LAST_WORDS = 2  # a failure warned about this close to the end of a log with nothing else is its error
WARNED_RUN = 10  # ... and the ones warned about this many lines before it
TIME_LOOKBACK = 8  # lines looked back from a window for the time the log had reached
MAX_FOUND = 20_000  # bound on errors kept; beyond it only exceptions are kept
_INFLATE_STEP = 16 * 1024 * 1024
FIRST_PAGE = 64 * 1024  # the first page reports every context line (capped), later pages one a page
PAGE = 1024 * 1024  # pre-filter pages: bounds at absolute positions, not at chunk ends
PROFILE_BYTES = 64 * 1024  # the head the capture profile is learned from
HEAD_PROFILE_LINES = 400
# a newest-first copy is held whole to be read from its end; a longer one is read as given
# (held and turned around, it costs twice its size in memory)
MAX_REVERSED = 48 * 1024 * 1024


class Analyzer:
    """Streaming analyzer: `feed` chunks in order, then `finish`.

    The answer never depends on how the input is cut into chunks: the capture profile is
    learned from the first PROFILE_BYTES of the log, and the pre-filter runs on pages whose
    bounds are absolute positions in the log (the first newline after each PAGE bytes),
    whatever the chunks were."""

    def __init__(self, *, secret_lines: bool = False, use_hyperscan: bool | None = None,
                 in_order: bool = False) -> None:
        # With secret_lines, the lines that may hold a secret are collected from the
        # pre-filter's pass over the pages (see analyze_for_storage).
        self.secret_lines: list[tuple[int, int]] | None = [] if secret_lines else None
        self.secret_lines_complete = True  # False when secret_lines may miss one (cut or wrapped lines)
        self._pending = b""  # bytes of the current page not processed yet
        self._pending_offset = 0  # position of _pending[0] in the (inflated) log
        self._lines_before = 0  # lines counted before the current page (a line cut by a page: once)
        self._inflater: zlib._Decompress | None = None
        self._started = False
        self._profile: Profile | None = None
        self._rejoiner: Rejoiner | None = None  # a hard-wrapped copy's lines, joined back
        self._page_cut = self._previous_cut = False  # a page cut inside a line that never ends
        # the first and the last WARNING lines with an error anchor, numbered (kept unparsed)
        self._first_warnings: list[tuple[int, bytes]] = []
        self._last_warnings: deque[tuple[int, bytes]] = deque(maxlen=WARNING_LINES_KEPT)
        self._scan = scan.PageScan(use_hyperscan)  # None: hyperscan when installed
        self._extractor = Extractor()
        self._context = ContextCollector()
        self._redactions = 0
        self._redactor = Redactor()  # state across lines: a PEM key's body lines
        self._bytes = 0
        self._notes: list[str] = []
        self._last_line: tuple[int, bytes] | None = None  # the last line that is not blank, numbered
        self._in_order = in_order  # True: read as given, whatever the head says of the order
        self._held: bytearray | None = None  # a newest-first log, held to be read from its end

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
                self._note_corrupt()
        self._learn(final=True)
        if self._held is not None:
            return self._from_the_end()
        self._drain(final=True)
        for joined in self._rejoiner.flush(self._lines_before) if self._rejoiner is not None else ():
            self._parse(joined.first, joined.last - joined.first + 1, joined.line, True)
        found = self._extractor.finish()
        root, symptoms = choose(found, unloaded=self._extractor.unloaded)
        if root is None and (self._first_warnings or self._last_warnings):  # nothing but warnings: read them
            for number, raw in sorted(dict([*self._first_warnings, *self._last_warnings]).items()):
                self._line(number, raw, True)
            found = self._extractor.finish()
            root, symptoms = choose(found, benign=False)
        warned = list(self._extractor.warned)
        last_words = _last_words(warned, self._last_line)
        if root is None and last_words:  # a log that ends warning of a failure, with no error
            found = [*found, *last_words]
            root, symptoms = choose(found, benign=False)
        elif root is not None and root.role == "symptom" and (before := _warned_before(warned, root, found)):
            # only wrappers, one pointing at an error it does not state ("See inner exception"):
            # a failure warned about just before it, in its stream, is that error
            found = [*found, *before]
            root, symptoms = choose(found, benign=False)
        elif (root is not None and root.truncated and not root.exception and not root.message
              and (before := _warned_before(warned, root, found, any_stream=True))):
            # a traceback cut before it states anything: a failure warned about just before
            # it began (c10d's "waitForInput: socket ... timed out" on the ranks, then the
            # scheduler's traceback) says more than where that process was
            found = [*found, *before]
            root, symptoms = choose(found, benign=False)
        statement = self._extractor.statement
        if root is None and statement is not None and len(self._extractor.statement_templates) == 1:
            # a log without any error but one line that states a failure in words (a paste
            # of just the message, or that line among a launch's progress): that is the error
            found = [*found, statement]
            root, symptoms = choose(found, benign=False)
        all_frames = [frame for item in found for frame in item.event.frames]
        frames_text = " ".join(f.file for f in all_frames[-400:])
        context = self._context.build(root, frames_text, [f.file for f in (root.frames if root and root.frames else all_frames)])
        longest = max((item.event.frames for item in found), key=len, default=[])
        quoting = [] if root is None or root.frames else next(
            (item.event.frames for item in found if item.event.line_number == root.line_number and item.event.frames), [])
        phase = self._context.phase(root, root.line_number if root else None, context.engine, longest, quoting)
        verdict = "no_error" if root is None else ("not_captured" if root.role == "symptom" else "found")
        if verdict == "not_captured":
            self._notes.append(not_captured([root, *symptoms]))
        elif root is None and self._extractor.unstated is not None:
            verdict = "not_captured"
            self._notes.append(unstated_error(*self._extractor.unstated))
        elif root is None and self._extractor.native_stack is not None:
            verdict = "not_captured"
            self._notes.append(native_stack_only(*self._extractor.native_stack))
        elif root is None and self._last_line is not None and (
                context.engine or self._context.phase_markers or self._context.first_timestamp is not None):
            # a launch's log (an engine, its stages, or a program's timestamped records) that
            # holds no error: it ends before the error that stopped it
            verdict = "not_captured"
            number, raw = self._last_line
            text, _ = Redactor().line(parse_line(number, raw[:MAX_LINE].decode("utf-8", "replace"), self._profile).body)
            self._notes.append(log_ends_early(phase, number, text))
        first, crash, seconds = self._context.seconds_to_crash(root.line_number if root else None)
        processes = sorted({label for key in self._extractor.streams if (label := _key_label(key))})
        identity = fingerprint(root)
        if root is None and verdict == "not_captured":
            identity.signature = "(cause not captured in this log)"  # its title: not "no error"
        return Analysis(
            fingerprint=identity,
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
            capture=list(self._profile.describe()) if self._profile else [],
            verdict=verdict,
        )

    # ----------------------------------------------------------------------------------
    def _from_the_end(self) -> Analysis:
        """The analysis of a newest-first log (see kb.core.order): its lines read from the
        last to the first, line numbers counted in the log as given."""
        assert self._held is not None
        lines = self._held.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        reader = Analyzer(in_order=True, use_hyperscan=self._scan.use_hyperscan)
        reader.feed(b"\n".join(reversed(lines)) + b"\n")
        analysis = reader.finish()
        for event in {id(event): event for event in [analysis.root_cause, *analysis.symptoms] if event}.values():
            if event.line_number:  # (each event once)
                event.line_number = len(lines) - event.line_number + 1
        analysis.capture.insert(0, "newest line first (a log viewer's copy): read from the last line up")
        analysis.bytes = self._bytes
        analysis.notes = [*self._notes, *analysis.notes]
        self.secret_lines_complete = False  # the reader's ranges are the turned log's
        return analysis

    def _read_as_given(self) -> None:
        """Too long to hold (MAX_REVERSED): read the newest-first log as given."""
        assert self._held is not None
        held, self._held = bytes(self._held), None
        self._notes.append("the log lists its newest line first but is too long to turn around: read as given")
        self._pending = held
        self._drain(final=False)

    def _note_corrupt(self) -> None:
        if "gzip stream is corrupt; analysed what could be decompressed" not in self._notes:
            self._notes.append("gzip stream is corrupt; analysed what could be decompressed")

    def _inflate(self, data: bytes) -> None:
        inflater = self._inflater
        assert inflater is not None
        try:
            chunk = inflater.decompress(data, _INFLATE_STEP)
            self._take(chunk)
            while inflater.unconsumed_tail:
                self._take(inflater.decompress(inflater.unconsumed_tail, _INFLATE_STEP))
        except zlib.error:
            self._note_corrupt()

    def _take(self, data: bytes) -> None:
        self._bytes += len(data)
        if self._held is not None:
            self._held += data
            if len(self._held) > MAX_REVERSED:
                self._read_as_given()
            return
        if self._profile is not None and self._pending:
            start = self._straddling_page(data)
            if start is not None:  # the rest is paged in place: no copy of the whole chunk
                self._pending_offset += len(self._pending)
                self._pending = data
                self._drain(final=False, begin=start)
                return
        self._pending = self._pending + data if self._pending else data
        if self._profile is None:
            self._learn(final=False)
        if self._profile is not None:
            self._drain(final=False)

    def _learn(self, final: bool) -> None:
        """Learn the capture profile from the head once PROFILE_BYTES (or all) are in."""
        if self._profile is not None:
            return
        if not final and len(self._pending) < PROFILE_BYTES:
            return
        head = self._pending[:PROFILE_BYTES]
        lines = head.decode("utf-8", "replace").split("\n")
        if len(self._pending) > PROFILE_BYTES or not final:
            lines = lines[:-1]  # the last one may be cut
        head_lines = [line[:MAX_LINE] for line in lines[:HEAD_PROFILE_LINES]]
        self._profile = Profile.learn(head_lines)
        if not self._in_order and newest_first(head_lines, self._profile):
            self._held, self._pending = bytearray(self._pending), b""
        self._scan.capture_prefix = self._capture_prefix if self._profile.captured else None
        if self._profile.wrap_width or self._profile.inner_wrap_width or self._profile.word_wrap_width:
            self._rejoiner = Rejoiner(self._profile)

    def _capture_prefix(self, raw: bytes) -> int:
        """Bytes at the head of `raw` that the capture added (0 when none, or when the
        capture re-encoded the line, as docker's JSON does)."""
        text = raw[:MAX_LINE].decode("utf-8", "surrogateescape")  # byte-exact when encoded back
        peeled = peel(text, self._profile)
        if not peeled.layers or not text.endswith(peeled.text):
            return 0
        return len(text[:len(text) - len(peeled.text)].encode("utf-8", "surrogateescape"))

    def _straddling_page(self, data: bytes) -> int | None:
        """Process the page that begins in `_pending` and ends in `data` (the same page
        the joined bytes would give) and return where in `data` the next page starts;
        None when that page does not end in `data`."""
        pending, absolute = self._pending, self._pending_offset
        bound = FIRST_PAGE if absolute < FIRST_PAGE else (absolute // PAGE + 1) * PAGE
        target = bound - absolute - len(pending)  # index in `data` of the page bound
        if target > len(data):
            return None
        newline = data.find(b"\n", max(target - 1, 0))
        if newline < 0:
            return None
        page = pending + data[:newline + 1]
        self._page(page, 0, len(page), absolute)
        return newline + 1

    def _drain(self, final: bool, begin: int = 0) -> None:
        """Process every whole page of `_pending` from `begin` (all of it when `final`)."""
        data = self._pending
        while True:
            page_end = self._page_end(data, begin, final)
            if page_end is None:
                break
            self._page(data, begin, page_end, self._pending_offset + begin)
            begin = page_end
        if begin:
            self._pending = data[begin:]
            self._pending_offset += begin

    def _page_end(self, data: bytes, begin: int, final: bool) -> int | None:
        """End of the page that starts at data[begin] (a line boundary), or None while
        its end has not arrived. The first page ends at the first newline at or after
        FIRST_PAGE bytes, the others at the first newline at or after each multiple of
        PAGE: absolute positions, so the pages are the same however the log was fed. A
        line that never ends is cut after MAX_LINE * 4 bytes."""
        size = len(data)
        if begin >= size:
            return None
        absolute = self._pending_offset + begin
        bound = FIRST_PAGE if absolute < FIRST_PAGE else (absolute // PAGE + 1) * PAGE
        target = bound - self._pending_offset
        if target <= size:
            newline = data.find(b"\n", target - 1)
            if newline >= 0:
                return newline + 1
            if size - target > MAX_LINE * 4:
                self.secret_lines_complete = False  # a secret may straddle the cut
                self._page_cut = True
                return size
        if final:
            return size
        return None

    def _page(self, block: bytes, begin: int, end: int, offset: int) -> None:
        """Parse the lines worth parsing in block[begin:end] (whole lines, but for the
        last line of the log); block[begin] is at `offset` in the log."""
        assert self._profile is not None
        page_begin = begin
        if self._previous_cut:  # the last page ended inside a line, counted there: not again
            self._lines_before -= 1
        self._previous_cut, self._page_cut = self._page_cut, False
        if self._profile.wrap_width or self._profile.inner_wrap_width or self._profile.word_wrap_width:
            # A terminal copy: anchors may be cut by the wrap, so every line is read (and
            # the stored log is redacted whole: a secret may be cut by the wrap too).
            ranges: list[tuple[int, int]] = [(begin, end)]
            secrets = warnings = last_warnings = None
            self.secret_lines_complete = False
        else:
            secrets, warnings, last_warnings = [], [], deque(maxlen=WARNING_LINES_KEPT)
            ranges = self._scan.windows(block, begin, end, secrets, warnings, last_warnings)
            if self.secret_lines is not None:
                self.secret_lines += [(offset - begin + start, offset - begin + stop) for start, stop in secrets]
        marked = None if secrets is None else {start for start, _ in secrets}
        if self._lines_before < HEAD_LINES and self._context.first_timestamp is None:
            # The head is parsed up to its first timestamp (where the time to crash
            # starts); the lines with anything else worth parsing have anchors.
            head_end, number = begin, self._lines_before
            while number < HEAD_LINES and self._context.first_timestamp is None and head_end < end:
                nxt = block.find(b"\n", head_end, end)
                stop = end if nxt < 0 else nxt + 1
                number += 1
                self._line(number, block[head_end:stop].rstrip(b"\n"), marked is None or head_end in marked)
                head_end = stop
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
        if position < end:  # the lines after the last window (a last one without newline too)
            line_number += block.count(b"\n", position, end) + (block[end - 1:end] != b"\n")
        lines_before, self._lines_before = self._lines_before, line_number
        self._last_line = _last_text_line(block, page_begin, end, line_number) or self._last_line
        if warnings or last_warnings:
            self._keep_warnings(block, begin, end, lines_before, warnings, last_warnings)

    def _keep_warnings(self, block: bytes, begin: int, end: int, lines_before: int,
                       first: list[tuple[int, int]], last: deque) -> None:
        """Keep the first and the last WARNING_LINES_KEPT WARNING lines with an error
        anchor the pre-filter skipped (numbered), for a log whose only error they hold.
        `block[begin:end]` holds lines `lines_before + 1` to `_lines_before`."""
        first = [w for w in first if w[0] >= begin]  # the head was parsed whole
        room = max(WARNING_LINES_KEPT - len(self._first_warnings), 0)
        self._first_warnings += _numbered(block, first[:room], begin, lines_before)
        tail = [w for w in (first[room:] + list(last))[-WARNING_LINES_KEPT:] if w[0] >= begin]
        if tail:  # counted back from the page's end: they are near it
            position = tail[0][0]
            before = self._lines_before - (block[end - 1:end] != b"\n") - block.count(b"\n", position, end)
            self._last_warnings.extend(_numbered(block, tail, position, before))

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
            timestamp = parse_line(number, raw.decode("utf-8", "replace"), self._profile).timestamp
            if timestamp:
                self._context.note_time(number, timestamp)
                return
            end, number = line_start, number - 1

    def _line(self, number: int, raw: bytes, may_hold_secret: bool) -> None:
        """One line as read; the pieces of a hard-wrapped copy are joined first."""
        text = raw[:MAX_LINE].decode("utf-8", "replace")
        if self._rejoiner is None:
            self._parse(number, 1, text, may_hold_secret)
            return
        for joined in self._rejoiner.feed(number, text):
            self._parse(joined.first, joined.last - joined.first + 1, joined.line, True)

    def _parse(self, number: int, pieces: int, line: str | Peeled, may_hold_secret: bool) -> None:
        """Parse one whole line (`pieces` physical lines from line `number`)."""
        peeled = line if isinstance(line, Peeled) else None
        text = peeled.text if peeled is not None else line
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE]
        if "\x00" in text:  # a NUL may have split a literal the pre-filter looks for
            text = text.replace("\x00", "")
            may_hold_secret = True
        if may_hold_secret or self._redactor.open:
            text, count = self._redactor.line(text)
            self._redactions += count
        if peeled is not None:
            peeled.text = text
        whole = parse_line(number, peeled if peeled is not None else text, self._profile)
        whole.pieces = pieces
        first, *glued = unglued(whole.body)
        whole.body = first
        # lines a padded copy glued on: the same writer's, without a record header of their
        # own, but for the records a paste joined into one line, each read with its header
        for parsed in [whole, *(self._glued_record(number, part, whole) if starts_record(part)
                                else replace(whole, body=part, **_GLUED_ON) for part in glued)]:
            if len(self._extractor.found) < MAX_FOUND or parsed.level not in ("ERROR", "CRITICAL"):
                self._extractor.feed(parsed)
            self._context.feed(parsed)

    def _glued_record(self, number: int, part: str, whole: LogLine) -> LogLine:
        """A record a paste glued into a line, read with its own header; the capture
        prefixed the physical line once, so the record is in that line's stream."""
        parsed = parse_line(number, part, self._profile)
        if not parsed.layers:
            parsed.stream, parsed.host, parsed.layers = whole.stream, whole.host, whole.layers
        return parsed


_GLUED_ON = {"level": None, "source": None, "header": False, "wraps": False}


def _numbered(block: bytes, ranges: list[tuple[int, int]], position: int, lines_before: int):
    """(line number, bytes) of each line range, in order; `lines_before` lines come before
    block[position]."""
    for start, stop in ranges:
        lines_before += block.count(b"\n", position, start)
        position = start
        yield lines_before + 1, bytes(block[start:stop].rstrip(b"\n"))


def _last_text_line(block: bytes, begin: int, end: int, last_number: int) -> tuple[int, bytes] | None:
    """(number, bytes) of the last line of block[begin:end] that is not blank; the
    block's last line is line `last_number`."""
    stop = end
    while stop > begin:
        start = block.rfind(b"\n", begin, stop - 1) + 1 or begin
        if block[start:stop].strip():
            return last_number - block.count(b"\n", start, end) + (block[end - 1:end] == b"\n"), block[start:stop].rstrip()
        stop = start
    return None


def _last_words(warned: list[Found], last_line: tuple[int, bytes] | None) -> list[Found]:
    """The failures a log ends warning about: the last one ends at most LAST_WORDS lines
    before the log does, and the run of them before it (Ray's "Failed to connect to GCS",
    then its "Failed to get cluster ID": the first says why)."""
    if not warned or last_line is None or warned[-1].end_line < last_line[0] - LAST_WORDS:
        return []
    start = (warned[-1].event.line_number or 0) - WARNED_RUN
    return [f for f in warned if (f.event.line_number or 0) >= start]


def _warned_before(warned: list[Found], wrapper: ErrorEvent, found: list[Found],
                   any_stream: bool = False) -> list[Found]:
    """Failures warned about in the wrapper's stream (its capture label and process, not
    the process label its text may name; any stream with `any_stream`) in the lines just
    before it, or before its traceback (a terminal that wraps long lines makes a
    traceback longer, not farther)."""
    line = wrapper.line_number or 0
    itself = [f for f in found if f.event.line_number == line]
    streams = {f.key for f in itself}
    start = min((f.first_line for f in itself if f.first_line), default=line)
    return [f for f in warned if start - WARNED_RUN <= (f.event.line_number or 0) < line
            and (any_stream or f.key in streams)]


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
    stored, redactions = redacted(data, lines)
    return analysis, stored, redactions

