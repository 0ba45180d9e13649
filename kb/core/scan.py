"""Pre-filter: find the few lines worth parsing in a large log in one pass of C code.

A 100 MB log is mostly INFO lines and progress bars. Hyperscan matches every anchor
literal of `patterns` at once (gigabytes per second); only lines with an anchor, plus the
lines that follow an error anchor (frames' code lines, message continuations), reach the
Python parser. Without hyperscan (an unsupported platform) every line is parsed: same
result, slower."""

from __future__ import annotations

from functools import lru_cache

from kb.core.patterns import BLOCK_ANCHORS, CONTEXT_ANCHORS, ERROR_ANCHORS, SECRET_ANCHORS

FOLLOWING_LINES = 12  # lines kept after an error anchor: code lines, message continuations
CONTEXT_SLICE = 1024 * 1024  # in larger blocks each context anchor is kept once per slice

try:  # pragma: no cover - import guard
    import hyperscan
except ImportError:  # pragma: no cover
    hyperscan = None


def _escape(literal: str) -> bytes:
    return "".join("\\" + c if not c.isalnum() and c != " " else c for c in literal).encode()


@lru_cache(maxsize=1)
def _databases():
    """Errors: expression 0 matches a line with any block anchor, 1 a line with any
    single-line anchor; each ends at the newline, so a line is reported once per
    expression however many anchors it holds. Context: one expression per anchor,
    reported once per scanned slice (they repeat all over a long log: progress bars,
    metrics lines)."""
    blocks = sorted(set(BLOCK_ANCHORS))
    lines = sorted((set(ERROR_ANCHORS) | set(SECRET_ANCHORS)) - set(blocks))
    context = sorted(set(CONTEXT_ANCHORS) - set(blocks) - set(lines))
    to_eol = b"[^\\n]*\\n"
    errors = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    expressions = [b"(?:" + b"|".join(_escape(a) for a in blocks) + b")" + to_eol,
                   b"(?:" + b"|".join(_escape(a) for a in lines) + b")" + to_eol]
    errors.compile(expressions=expressions, ids=[0, 1], elements=2, flags=[0, 0])
    expressions = [_escape(a) for a in context]  # literals: compile in milliseconds
    every = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    every.compile(expressions=expressions, ids=list(range(len(context))), elements=len(context), flags=[0] * len(context))
    first = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    first.compile(expressions=expressions, ids=list(range(len(context))), elements=len(context),
                  flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(context))
    return errors, every, first


def available() -> bool:
    return hyperscan is not None


def windows(block: bytes) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of whole lines of `block` worth parsing, in order, merged."""
    if hyperscan is None:
        return [(0, len(block))]
    errors, every_context, first_context = _databases()
    hits: list[tuple[int, bool]] = []

    def on_error(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        hits.append((end - 1, pattern_id == 0))

    offset = 0

    def on_context(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        hits.append((offset + end, False))

    errors.scan(block, match_event_handler=on_error)
    if len(block) <= CONTEXT_SLICE:
        every_context.scan(block, match_event_handler=on_context)
    else:
        view = memoryview(block)
        for offset in range(0, len(block), CONTEXT_SLICE):
            first_context.scan(bytes(view[offset:offset + CONTEXT_SLICE]), match_event_handler=on_context)
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
        line_start = rfind(b"\n", 0, end) + 1
        line_end = find(b"\n", end)
        line_end = len(block) if line_end < 0 else line_end + 1
        if find(b" WARNING ", line_start, min(line_start + 120, line_end)) >= 0:
            # logged at WARNING level: the engine went on (a recovered traceback, a
            # deprecation); never the cause, and long logs are full of them
            if is_error:
                error_line_end = line_end
            continue
        if is_error:
            error_line_end = line_end
            for _ in range(FOLLOWING_LINES):
                if line_end >= len(block):
                    break
                next_end = find(b"\n", line_end)
                line_end = len(block) if next_end < 0 else next_end + 1
        if ranges and line_start <= ranges[-1][1]:
            if line_end > ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], line_end)
        else:
            ranges.append((line_start, line_end))
        covered_end = max(covered_end, line_end)
    return ranges
