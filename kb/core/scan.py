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
CONTEXT_HITS_PER_BLOCK = 64  # lines kept per context anchor and block

try:  # pragma: no cover - import guard
    import hyperscan
except ImportError:  # pragma: no cover
    hyperscan = None


def _escape(literal: str) -> bytes:
    return "".join("\\" + c if not c.isalnum() and c != " " else c for c in literal).encode()


@lru_cache(maxsize=1)
def _database():
    """Pattern ids: [0, blocks) start a block, [blocks, lines) are single lines, the rest
    are context anchors (capped per block)."""
    blocks = sorted(set(BLOCK_ANCHORS))
    lines = sorted((set(ERROR_ANCHORS) | set(SECRET_ANCHORS)) - set(blocks))
    context = sorted(set(CONTEXT_ANCHORS) - set(blocks) - set(lines))
    expressions = [_escape(a) for a in blocks + lines + context]
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=expressions, ids=list(range(len(expressions))), elements=len(expressions),
                     flags=[0] * len(expressions))
    return database, len(blocks), len(blocks) + len(lines)


def available() -> bool:
    return hyperscan is not None


def windows(block: bytes) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of whole lines of `block` worth parsing, in order, merged."""
    if hyperscan is None:
        return [(0, len(block))]
    database, block_count, line_count = _database()
    hits: list[tuple[int, bool]] = []
    seen: dict[int, int] = {}

    def on_match(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        if pattern_id < line_count:
            hits.append((end, pattern_id < block_count))
            return
        # context anchors (progress bars, metrics lines) repeat all over a long log: the
        # first few of each per block say all there is to say
        count = seen.get(pattern_id, 0)
        if count < CONTEXT_HITS_PER_BLOCK:
            seen[pattern_id] = count + 1
            hits.append((end, False))

    database.scan(block, match_event_handler=on_match)
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
        if is_error and find(b" WARNING ", line_start, min(line_start + 120, line_end)) >= 0:
            # a block logged at WARNING level: the engine went on; one line is enough
            is_error = False
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
