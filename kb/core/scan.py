"""Pre-filter: find the few lines worth parsing in a large log in one pass of C code.

A 100 MB log is mostly INFO lines and progress bars. Hyperscan matches every anchor
literal of `patterns` at once (gigabytes per second); only lines with an anchor, plus the
lines that follow an error anchor (frames' code lines, message continuations), reach the
Python parser. Without hyperscan (an unsupported platform) an Aho-Corasick pass finds the
same hits: same lines, same result, slower."""

from __future__ import annotations

import hashlib
import os
import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

import ahocorasick

from kb.core.patterns import BLOCK_ANCHORS, ERROR_ANCHORS, SECRET_ANCHORS, Rule

FOLLOWING_LINES = 12  # lines kept after an error anchor: code lines, message continuations
CONTEXT_HITS = 48  # on the first page, at most this many hits per context anchor
WARNING_LINES_KEPT = 32  # skipped WARNING lines with an error anchor kept: the first and the last

try:  # pragma: no cover - import guard
    import hyperscan
except ImportError:  # pragma: no cover
    hyperscan = None


def _escape(literal: str) -> bytes:
    return "".join("\\" + c if not c.isalnum() and c != " " else c for c in literal).encode()


_COMPILE = threading.Lock()  # the first uploads may arrive on several threads at once
_CACHE_DIR: list[Path] = []  # set by the command line (an I/O layer), empty in the core


def use_cache(directory: Path | None) -> None:
    """Keep compiled databases in `directory`: compiling costs ~50 ms, loading ~1 ms,
    which matters for a command-line run. Any failure to read or write the cache only
    means compiling again."""
    _CACHE_DIR[:] = [directory] if directory else []


def _build(name: str, expressions: list[bytes], flags: list[int]):
    """A block-mode database of `expressions` (ids 0..n-1), from the cache when it has it."""
    ids = list(range(len(expressions)))
    key = hashlib.sha256(repr((hyperscan.__version__, expressions, flags)).encode()).hexdigest()[:16]
    path = _CACHE_DIR[0] / f"scan-{name}-{key}.hsdb" if _CACHE_DIR else None
    if path is not None:
        try:
            return hyperscan.loadb(path.read_bytes(), hyperscan.HS_MODE_BLOCK)
        except Exception:  # missing, stale or from another CPU: compile it
            pass
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=expressions, ids=ids, elements=len(ids), flags=flags)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(hyperscan.dumpb(database))
            partial.replace(path)
        except OSError:
            pass
    return database


def _databases():
    with _COMPILE:
        return _compiled_databases()


@lru_cache(maxsize=1)
def _compiled_databases():
    """One literal database (a literal database scans several times faster than one with
    patterns), ids as `_anchors` orders them. In `every` context anchors report each
    occurrence (the first page); in `first` once per page (long logs repeat them in
    every progress bar and metrics line)."""
    ordered = _anchors()
    literals = [_escape(a) for a in ordered]
    _, errors, _ = _anchor_ids()
    every = _build("every", literals, [0] * len(literals))
    first = _build("first", literals, [0] * errors + [hyperscan.HS_FLAG_SINGLEMATCH] * (len(literals) - errors))
    return every, first


def _secret_database():
    with _COMPILE:
        return _compiled_secret_database()


@lru_cache(maxsize=1)
def _compiled_secret_database():
    return _build("secrets", [b"(?:" + b"|".join(_escape(a) for a in SECRET_ANCHORS) + b")[^\\n]*(?:\\n|$)"], [0])


def secret_lines(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of the lines that may hold a secret (each holds a literal of
    SECRET_ANCHORS), in order; a range ends after its newline (at the end of `data` for
    a last line without one). Hyperscan finds them, else an Aho-Corasick pass: the same
    ranges."""
    if hyperscan is None:
        return _automaton_secret_lines(data)
    ranges: list[tuple[int, int]] = []

    def on_match(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        line_start = data.rfind(b"\n", 0, end - 1) + 1
        if not ranges or ranges[-1][1] <= line_start:
            ranges.append((line_start, end))

    database = _secret_database()
    database.scan(data, match_event_handler=on_match, scratch=_scratch(database))
    return ranges


@lru_cache(maxsize=1)
def _secret_automaton() -> ahocorasick.Automaton:
    automaton = ahocorasick.Automaton()
    for literal in SECRET_ANCHORS:
        automaton.add_word(literal.encode().decode("latin-1"), len(literal))
    automaton.make_automaton()
    return automaton


def _automaton_secret_lines(data: bytes) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    size = len(data)
    covered = -1  # end of the last range: hits before it are on a line already taken
    find, rfind = data.find, data.rfind
    for last, _ in _secret_automaton().iter(data.decode("latin-1")):
        if last < covered:
            continue
        line_start = rfind(b"\n", 0, last) + 1
        line_end = find(b"\n", last)
        covered = size if line_end < 0 else line_end + 1
        ranges.append((line_start, covered))
    return ranges


class LiteralSet:
    """Which of a fixed set of literals occur in a short text (a parsed log line): one
    Aho-Corasick pass, ~1 us, where testing each of ~100 literals with `in` costs
    ~20 us. Unlike a hyperscan call it keeps the GIL: hyperscan releases and retakes
    it on every call, and for the ~50 lines of an upload those handoffs cost the
    service more CPU than the matching, while other threads analyse other uploads."""

    def __init__(self, literals: list[str], caseless: frozenset[int] = frozenset()) -> None:
        self.literals = literals
        self.caseless = caseless  # indices of the literals found in any case
        self._automata: tuple[ahocorasick.Automaton | None, ahocorasick.Automaton | None] | None = None

    def present(self, text: str) -> list[int]:
        """Indices of the literals in `text` (each once, in no particular order)."""
        exact, caseless = self._automata or self._build()
        found: set[int] = set()
        if exact is not None:
            for _, indices in exact.iter(text):
                found.update(indices)
        if caseless is not None:
            for _, indices in caseless.iter(text.lower()):
                found.update(indices)
        return list(found)

    def _build(self) -> tuple[ahocorasick.Automaton | None, ahocorasick.Automaton | None]:
        """Built on first use (a table the process never consults costs nothing); two
        threads building at once build the same thing."""
        by_key: tuple[dict[str, list[int]], dict[str, list[int]]] = ({}, {})
        for index, literal in enumerate(self.literals):
            if index in self.caseless:
                by_key[1].setdefault(literal.lower(), []).append(index)
            else:
                by_key[0].setdefault(literal, []).append(index)
        self._automata = (_automaton(by_key[0]), _automaton(by_key[1]))
        return self._automata


def _automaton(indices_by_key: dict[str, list[int]]) -> ahocorasick.Automaton | None:
    if not indices_by_key:
        return None
    automaton = ahocorasick.Automaton()
    for key, indices in indices_by_key.items():
        automaton.add_word(key, tuple(indices))
    automaton.make_automaton()
    return automaton


class RuleIndex:
    """The rules of a pattern table worth trying on a text, in table order: a rule is
    tried only when the text holds one of its anchors (a rule without anchors always
    is). One LiteralSet pass instead of an `in` test per anchor of every rule."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.table = rules
        self.rules = tuple(rules)
        anchors = sorted({anchor for rule in self.rules for anchor in rule.anchors})
        self._literals = LiteralSet(anchors)
        self._rules_of = [tuple(n for n, rule in enumerate(self.rules) if anchor in rule.anchors)
                          for anchor in anchors]
        self._always = frozenset(n for n, rule in enumerate(self.rules) if not rule.anchors)

    def candidates(self, text: str) -> list[Rule]:
        picked = set(self._always)
        for found in self._literals.present(text):
            picked.update(self._rules_of[found])
        return [self.rules[n] for n in sorted(picked)]

    def first(self, text: str) -> Rule | None:
        """The first rule whose anchors and pattern match `text`."""
        for rule in self.candidates(text):
            if rule.pattern.search(text):
                return rule
        return None


_INDEXES: dict[int, RuleIndex] = {}


def first_rule(rules: tuple[Rule, ...], text: str) -> Rule | None:
    """The first rule of a table (one of kb.core.patterns') whose anchors and pattern
    match `text`: most rules are never compiled, let alone run."""
    index = _INDEXES.get(id(rules))
    if index is None or index.table is not rules:
        index = _INDEXES[id(rules)] = RuleIndex(rules)
    return index.first(text)


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


class PageScan:
    """The pre-filter of one log, page by page: byte ranges of the lines worth parsing.

    Hyperscan finds the anchor literals when it is installed; otherwise an Aho-Corasick
    pass finds exactly the same hits (each literal at each end offset; context literals
    once a page after the first). Everything after the hits is one piece of Python, so
    the lines picked, and with them the whole analysis, are the same either way. State
    that crosses pages (the following lines an error anchor still owes, the context
    caps of the first page) lives here, so page bounds cut nothing."""

    def __init__(self, use_hyperscan: bool | None = None) -> None:
        self.use_hyperscan = hyperscan is not None if use_hyperscan is None else use_hyperscan
        self.pages = 0
        self._owed = 0  # following lines of the last error anchor not yet included
        self._seen: dict[int, int] = {}  # context anchor -> hits kept (first page)
        # bytes of a line's head the capture added (`vllm-1  | `, `host prog[pid]: `): a
        # context anchor there says nothing about the log, so it selects no line
        self.capture_prefix: Callable[[bytes], int] | None = None

    def windows(self, block: bytes, begin: int = 0, stop: int | None = None,
                secrets: list[tuple[int, int]] | None = None,
                warnings: list[tuple[int, int]] | None = None,
                last_warnings: deque | None = None) -> list[tuple[int, int]]:
        """Byte ranges [start, end) of whole lines of block[begin:stop] worth parsing, in
        order, merged; offsets are block's. With `secrets`, the same pass appends the
        ranges of the lines that may hold a secret; with `warnings` (and the bounded
        `last_warnings`), those of the first (and the last) WARNING-level lines with an
        error anchor it skipped, WARNING_LINES_KEPT of each."""
        stop = len(block) if stop is None else stop
        every = self.pages == 0
        self.pages += 1
        block_ids, error_ids, secret_ids = _anchor_ids()
        hits = (_hyperscan_hits if self.use_hyperscan else _automaton_hits)(block, begin, stop, every)
        find, rfind = block.find, block.rfind
        # The lines the hits fall on, each once: (start, end after its newline, error?).
        kept: list[tuple[int, int, bool]] = []
        line_start = line_end = line_stop = -1  # the line of the last hit; end: its newline
        at_warning = False
        kept_here = 0  # 0: the line is not kept (yet), 1: as context, 2: as an error's line
        keep_warnings = warnings is not None and last_warnings is not None
        seen = self._seen if every else {}
        secret_end = -1
        for position, pattern_id in hits:
            if position > line_end:
                line_start = rfind(b"\n", begin, position) + 1 or begin
                line_end = find(b"\n", position, stop)
                if line_end < 0:
                    line_end = line_stop = stop
                else:
                    line_stop = line_end + 1
                at_warning = _at_warning_level(block, line_start, line_end)
                kept_here = 0
            if secrets is not None and pattern_id in secret_ids and secret_end <= line_start:
                secret_end = line_stop
                secrets.append((line_start, line_stop))
            if at_warning:
                # Logged at WARNING level (vLLM's prefix, behind any capture prefix): the
                # engine went on (a recovered traceback, a deprecation) and long logs are
                # full of them. Such a line is the cause only of a log that holds nothing
                # else: the first and last few with an error anchor are kept for that case.
                if keep_warnings and pattern_id < error_ids and not kept_here:
                    (warnings if len(warnings) < WARNING_LINES_KEPT else last_warnings).append((line_start, line_stop))
                    kept_here = 2
                continue
            if pattern_id < error_ids:
                is_error = pattern_id < block_ids
                if kept_here < 2 and (is_error or not kept_here):
                    if kept_here:
                        kept[-1] = (line_start, line_stop, is_error)
                    else:
                        kept.append((line_start, line_stop, is_error))
                    kept_here = 2 if is_error else 1
                continue
            count = seen.get(pattern_id, 0)
            if count >= CONTEXT_HITS:
                continue
            if every and self.capture_prefix is not None:
                if position - line_start <= self.capture_prefix(block[line_start:line_end]):
                    continue
            seen[pattern_id] = count + 1
            if not kept_here:
                kept.append((line_start, line_stop, False))
                kept_here = 1
        ranges: list[tuple[int, int]] = []
        if self._owed:
            line_end = begin
            while self._owed and line_end < stop:
                next_end = find(b"\n", line_end, stop)
                line_end = stop if next_end < 0 else next_end + 1
                self._owed -= 1
            ranges.append((begin, line_end))
        covered_end = ranges[-1][1] if ranges else -1
        error_line_end = -1  # end of the line of the last error anchor: its window is done
        for line_start, line_end, is_error in kept:
            if line_end <= covered_end and (not is_error or line_end <= error_line_end):
                continue
            if is_error:
                error_line_end = line_end
                owed = FOLLOWING_LINES
                while owed and line_end < stop:
                    next_end = find(b"\n", line_end, stop)
                    line_end = stop if next_end < 0 else next_end + 1
                    owed -= 1
                self._owed = owed
            if ranges and line_start <= ranges[-1][1]:
                if line_end > ranges[-1][1]:
                    ranges[-1] = (ranges[-1][0], line_end)
            else:
                ranges.append((line_start, line_end))
            covered_end = max(covered_end, line_end)
        if ranges and ranges[-1][1] < stop:
            self._owed = 0  # the window closed inside this page
        return ranges


def _at_warning_level(block: bytes, line_start: int, line_end: int) -> bool:
    """A record logged at WARNING level (vLLM's `WARNING 05-01 12:00:00 [...]`, first or
    behind a process label or capture prefix within the line's first 120 bytes); a
    message that only mentions WARNING is not one. (Hot: called for every line a hit
    falls on.)"""
    if block.startswith(b"WARNING ", line_start):
        level = line_start - 1
    else:
        level = block.find(b" WARNING ", line_start, min(line_start + 120, line_end))
        if level < 0:
            return False
    digit = level + 9
    return digit < line_end and 48 <= block[digit] <= 57


@lru_cache(maxsize=1)
def _anchors() -> list[str]:
    blocks, lines, context = _anchor_classes()
    return blocks + lines + context


@lru_cache(maxsize=1)
def _anchor_classes() -> tuple[list[str], list[str], list[str]]:
    """Block anchors, line anchors, context anchors. An error anchor that holds another
    one (`Engine core initialization failed` holds `failed`) selects no line the other
    does not: it is left out, since every literal costs the scan (secret anchors stay:
    they mark lines for redaction on their own)."""
    block_set = set(BLOCK_ANCHORS)
    blocks = sorted(block_set - _holding_another(block_set, block_set))
    line_set = (set(ERROR_ANCHORS) | set(SECRET_ANCHORS)) - block_set
    covering = set(blocks) | line_set
    held = _holding_another(covering, line_set)
    lines = sorted(a for a in line_set if a in SECRET_ANCHORS or a not in held)
    from kb.core.context import CONTEXT_LITERALS  # the context reads what its own tables look for

    context = sorted(set(CONTEXT_LITERALS) - block_set - line_set)
    return blocks, lines, context


def _holding_another(anchors: set[str], candidates: set[str]) -> set[str]:
    """The candidates that hold one of `anchors` other than themselves: each anchor is
    looked for once in all candidates joined (a C search; every run of the command line
    needs this, and pairwise `in` tests cost more than analysing a short log)."""
    ordered = sorted(candidates)
    joined = "\0".join(ordered)
    starts = list(accumulate((len(a) + 1 for a in ordered[:-1]), initial=0))
    held: set[str] = set()
    for anchor in anchors:
        position = joined.find(anchor)
        while position >= 0:
            holder = ordered[bisect_right(starts, position) - 1]
            if holder != anchor:
                held.add(holder)
            position = joined.find(anchor, position + 1)
    return held


@lru_cache(maxsize=1)
def _anchor_ids() -> tuple[int, int, frozenset[int]]:
    """(ids below this are block anchors, ids below this are error anchors, secret ids)."""
    blocks, lines, _ = _anchor_classes()
    ordered = _anchors()
    return len(blocks), len(blocks) + len(lines), frozenset(i for i, a in enumerate(ordered) if a in SECRET_ANCHORS)


def _hyperscan_hits(block: bytes, begin: int, stop: int, every: bool) -> list[tuple[int, int]]:
    every_db, first_db = _databases()
    database = every_db if every else first_db
    hits: list[tuple[int, int]] = []
    append = hits.append

    def on_match(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
        append((begin + end, pattern_id))

    database.scan(memoryview(block)[begin:stop], match_event_handler=on_match, scratch=_scratch(database))
    hits.sort()
    return hits


@lru_cache(maxsize=1)
def _hit_automaton() -> ahocorasick.Automaton:
    automaton = ahocorasick.Automaton()
    by_text: dict[str, list[int]] = {}
    for index, literal in enumerate(_anchors()):
        by_text.setdefault(literal.encode().decode("latin-1"), []).append(index)
    for text, ids in by_text.items():
        automaton.add_word(text, tuple(ids))
    automaton.make_automaton()
    return automaton


def _automaton_hits(block: bytes, begin: int, stop: int, every: bool) -> list[tuple[int, int]]:
    """The hits hyperscan reports, found without it: bytes read as latin-1 keep offsets."""
    _, error_ids, _ = _anchor_ids()
    text = block[begin:stop].decode("latin-1")
    hits: list[tuple[int, int]] = []
    reported: set[int] = set()
    for last, ids in _hit_automaton().iter(text):
        for pattern_id in ids:
            if not every and pattern_id >= error_ids:
                if pattern_id in reported:
                    continue  # a context anchor is reported once a page (HS_FLAG_SINGLEMATCH)
                reported.add(pattern_id)
            hits.append((begin + last + 1, pattern_id))
    hits.sort()
    return hits
