"""Pre-filter: find the few lines worth parsing in a large log in one pass of C code.

A 100 MB log is mostly INFO lines and progress bars. Hyperscan matches every anchor
literal of `patterns` at once (gigabytes per second); only lines with an anchor, plus the
lines that follow an error anchor (frames' code lines, message continuations), reach the
Python parser. Without hyperscan (an unsupported platform) every line is parsed: same
result, slower."""

from __future__ import annotations

import threading
from functools import lru_cache

from kb.core.patterns import BLOCK_ANCHORS, CONTEXT_ANCHORS, ERROR_ANCHORS, SECRET_ANCHORS

FOLLOWING_LINES = 12  # lines kept after an error anchor: code lines, message continuations
CONTEXT_SLICE = 64 * 1024  # in larger blocks each context anchor is kept once per slice
CONTEXT_HITS = 48  # in smaller ones, at most this many lines per context anchor

try:  # pragma: no cover - import guard
    import hyperscan
except ImportError:  # pragma: no cover
    hyperscan = None


def _escape(literal: str) -> bytes:
    return "".join("\\" + c if not c.isalnum() and c != " " else c for c in literal).encode()


_COMPILE = threading.Lock()  # the first uploads may arrive on several threads at once


def _databases():
    with _COMPILE:
        return _compiled_databases()


@lru_cache(maxsize=1)
def _compiled_databases():
    """`errors`: expression 0 matches a line with any block anchor, 1 a line with any
    single-line anchor; each ends at the newline, so a line is reported once per
    expression however many anchors it holds. Context anchors are literals (they
    compile in milliseconds): `every` reports each occurrence (small logs), `first`
    once per scan (long logs repeat them in every progress bar and metrics line)."""
    blocks = sorted(set(BLOCK_ANCHORS))
    lines = sorted((set(ERROR_ANCHORS) | set(SECRET_ANCHORS)) - set(blocks))
    context = sorted(set(CONTEXT_ANCHORS) - set(blocks) - set(lines))
    to_eol = b"[^\\n]*\\n"
    errors = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    errors.compile(expressions=[b"(?:" + b"|".join(_escape(a) for a in blocks) + b")" + to_eol,
                                b"(?:" + b"|".join(_escape(a) for a in lines) + b")" + to_eol],
                   ids=[0, 1], elements=2, flags=[0, 0])
    literals = [_escape(a) for a in context]
    ids = list(range(len(literals)))
    every = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    every.compile(expressions=literals, ids=ids, elements=len(ids), flags=[0] * len(ids))
    first = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    first.compile(expressions=literals, ids=ids, elements=len(ids), flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(ids))
    return errors, every, first


def _secret_database():
    with _COMPILE:
        return _compiled_secret_database()


@lru_cache(maxsize=1)
def _compiled_secret_database():
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[b"(?:" + b"|".join(_escape(a) for a in SECRET_ANCHORS) + b")[^\\n]*(?:\\n|$)"],
                     ids=[0], elements=1, flags=[0])
    return database


def secret_lines(data: bytes) -> list[tuple[int, int]] | None:
    """Byte ranges of the lines that may hold a secret (None: no pre-filter here, test
    every line)."""
    if hyperscan is None:
        return None
    ranges: list[tuple[int, int]] = []

    def on_match(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        line_start = data.rfind(b"\n", 0, end - 1) + 1
        if not ranges or ranges[-1][1] <= line_start:
            ranges.append((line_start, end))

    database = _secret_database()
    database.scan(data, match_event_handler=on_match, scratch=_scratch(database))
    return ranges


_THREAD = threading.local()


def _scratch(database) -> "hyperscan.Scratch":
    """Hyperscan needs scratch space per thread and database: the service analyses
    uploads on several threads at once."""
    scratches = getattr(_THREAD, "scratches", None)
    if scratches is None:
        scratches = _THREAD.scratches = {}
    scratch = scratches.get(database)
    if scratch is None:
        scratch = scratches[database] = hyperscan.Scratch(database)
    return scratch


def available() -> bool:
    return hyperscan is not None


def windows(block: bytes, begin: int = 0, stop: int | None = None) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of whole lines of block[begin:stop] worth parsing, in
    order, merged; offsets are block's. The slice is scanned in place, never copied."""
    stop = len(block) if stop is None else stop
    if hyperscan is None:
        return [(begin, stop)]
    errors, every, first = _databases()
    hits: list[tuple[int, bool]] = []
    offset = begin

    def on_error(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        hits.append((begin + end - 1, pattern_id == 0))

    seen: dict[int, int] = {}

    def on_context(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        count = seen.get(pattern_id, 0)
        if count < CONTEXT_HITS:
            seen[pattern_id] = count + 1
            hits.append((offset + end, False))

    view = memoryview(block)
    errors.scan(view[begin:stop], match_event_handler=on_error, scratch=_scratch(errors))
    if stop - begin <= CONTEXT_SLICE:
        every.scan(view[begin:stop], match_event_handler=on_context, scratch=_scratch(every))
    else:
        scratch = _scratch(first)
        for offset in range(begin, stop, CONTEXT_SLICE):
            first.scan(view[offset:min(offset + CONTEXT_SLICE, stop)], match_event_handler=on_context, scratch=scratch)
    if not hits:
        return []
    hits.sort()
    ranges: list[tuple[int, int]] = []
    covered_end = -1
    error_line_end = -1  # end of the line of the last error anchor: its window is done
    find = block.find
    rfind = block.rfind
    for end, is_error in hits:
        if end <= covered_end and (not is_error or end <= error_line_end):
            continue
        line_start = rfind(b"\n", begin, end) + 1 or begin
        line_end = find(b"\n", end, stop)
        line_end = stop if line_end < 0 else line_end + 1
        if find(b" WARNING ", line_start, min(line_start + 120, line_end)) >= 0:
            # logged at WARNING level: the engine went on (a recovered traceback, a
            # deprecation); never the cause, and long logs are full of them
            if is_error:
                error_line_end = line_end
            continue
        if is_error:
            error_line_end = line_end
            for _ in range(FOLLOWING_LINES):
                if line_end >= stop:
                    break
                next_end = find(b"\n", line_end, stop)
                line_end = stop if next_end < 0 else next_end + 1
        if ranges and line_start <= ranges[-1][1]:
            if line_end > ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], line_end)
        else:
            ranges.append((line_start, line_end))
        covered_end = max(covered_end, line_end)
    return ranges
