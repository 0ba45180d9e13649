"""Full-text search over the stored log text, with each database's own engine.

What is indexed. Every occurrence keeps `search_text`: the redacted log (never the raw
upload) when it is at most WHOLE_LOG_BYTES, else a bounded excerpt of it: the first
HEAD_LINES lines (the launch: versions, model, GPUs), the lines around every error the
analysis found (its root cause and the wrappers, with their tracebacks or native stacks:
EVENT_LINES_BEFORE/AFTER plus two lines per frame), and the last TAIL_LINES lines (where
a crash that the analysis did not recognize ends), each line cut at MAX_LINE_CHARS, the
whole at MAX_EXCERPT_BYTES. So a 256 MB log costs the index at most 64 KB of text, and
what a person searches for (a path, a symbol, a message printed near the crash) is in it.
The bound is what an upload pays: on the 2-core test machine, 64 KB of text costs SQLite's
trigram index ~18 ms and ~135 KB of index (unicode61 words would cost ~5 ms and ~15 KB,
but cannot find a part of a path); picking the excerpt costs ~1 ms for a 1 MB log, and
for a 100 MB one ~0.25 s when an event is near its end (newlines are counted up to it).

How it matches. The query is split at whitespace into terms (at most MAX_TERMS); an
occurrence matches when its text contains every term of at least MIN_TERM_CHARS
characters, literally (case-insensitive: `%`, `_`, `*` and quotes are just characters).
Terms are substrings, not words, because what people paste from a crash is a file name
(`flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so`), a path's tail (`libcuda.so.1` of
`/usr/lib/x86_64-linux-gnu/libcuda.so.1`) or a mangled C++ symbol
(`_ZN3c104cuda20CUDACachingAllocator9allocatorE`), which word tokenizers cut apart at
`_`, `.`, `/` and `-`, or keep whole where the query has only a part.

- SQLite (FTS5): an external-content FTS5 table over occurrences.search_text with the
  `trigram` tokenizer: every 3-character substring is a token, so any substring of 3 or
  more characters is found through the index, whatever punctuation it holds; `unicode61`
  with tokenchars would keep `libcuda.so.1` whole yet never find it inside the path.
  Triggers keep it in step with the table (insert, delete, update of search_text); a
  later migration that rebuilds `occurrences` in SQLite's batch mode drops them, and
  must run create_index again (after `DROP TABLE occurrence_search`).
- PostgreSQL: a GIN index on occurrences.search_vector, the excerpt's words
  (search_words): every run of letters and every run of digits, lowercased. Splitting at
  every non-alphanumeric and between letters and digits makes the tokens of a path's
  tail the same as inside the whole path (the default parser reads `/usr/.../libcuda.so.1`
  as one `file` token and `libcuda.so.1` as a `host`, which never match) and makes
  `CUDACachingAllocator` a token of the mangled symbol. The words are made in Python and
  cast to a tsvector, without the text search parser; a word's positions only count its
  repeats (up to RANKED_REPEATS) for ts_rank. An upload pays ~1.3 ms of Python (a 24 KB
  excerpt) and a GIN insert, where making them in SQL (regexp_replace and to_tsvector: migration 0007's
  index) cost ~8 ms of database CPU. A term's tokens (the last one as a prefix, the
  first left out when it may be the end of a longer token) narrow the rows through the
  index; an ILIKE per term, its wildcards escaped, then keeps only the literal substring
  matches. No phrase operator: the positions are not where the words are. Unlike the
  trigrams, a one-token term must start where a token starts (`CachingAllocator` alone
  is not found on Postgres; `CUDACaching`, `cuda20CUDA` and the whole symbol are).

Ranking: bm25() on SQLite, ts_rank() on Postgres (lower `score` is better on both), an
incident ranks by its best occurrence. The matching line is found in Python on the
page's hits (the line holding the most terms), the same on both databases. A term found
in most logs (`cuda`) costs Postgres a literal recheck of every excerpt holding its
tokens; KB_DB_TIMEOUT bounds such a query like any other.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from itertools import chain
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, column, func, literal_column, select, table, text
from sqlalchemy.orm import Session

from kb.db.models import Occurrence

WHOLE_LOG_BYTES = 64 * 1024
MAX_EXCERPT_BYTES = 64 * 1024
HEAD_LINES = 40
TAIL_LINES = 120
EVENT_LINES_BEFORE = 12
EVENT_LINES_AFTER = 12
MAX_EVENT_LINES = 300  # per event: a huge native stack is cut
MAX_LINE_CHARS = 1000
MIN_TERM_CHARS = 3  # FTS5's trigram tokenizer cannot find less
MAX_TERMS = 8
MAX_TERM_CHARS = 200
SHOWN_LINE_CHARS = 300

FTS_TABLE = "occurrence_search"
# SQLite keeps an FTS5 table's index in shadow tables next to it; they are not models.
SQLITE_FTS_TABLES = frozenset({FTS_TABLE, *(f"{FTS_TABLE}_{s}" for s in
                                           ("data", "idx", "docsize", "config", "content"))})
PG_INDEX = "ix_occurrences_search_vector"
MAX_WORD_CHARS = 200  # longer runs (a blob's) are not indexed: a tsvector word stops at 2 KB
RANKED_REPEATS = 4
_POSITIONS = ["", *(",".join(map(str, range(1, n + 1))) for n in range(1, RANKED_REPEATS + 1))]
_WORDS = re.compile(r"[^\W\d_]+|\d+")  # runs of letters, runs of digits

SQLITE_DDL = (
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(search_text, content='occurrences', "
    "content_rowid='id', tokenize='trigram')",
    f"CREATE TRIGGER {FTS_TABLE}_ai AFTER INSERT ON occurrences WHEN new.search_text IS NOT NULL "
    f"BEGIN INSERT INTO {FTS_TABLE}(rowid, search_text) VALUES (new.id, new.search_text); END",
    f"CREATE TRIGGER {FTS_TABLE}_ad AFTER DELETE ON occurrences WHEN old.search_text IS NOT NULL "
    f"BEGIN INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
    f"CREATE TRIGGER {FTS_TABLE}_au AFTER UPDATE OF search_text ON occurrences BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, search_text) "
    "SELECT 'delete', old.id, old.search_text WHERE old.search_text IS NOT NULL; "
    f"INSERT INTO {FTS_TABLE}(rowid, search_text) SELECT new.id, new.search_text "
    "WHERE new.search_text IS NOT NULL; END",
)
SQLITE_DROP = (
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_au", f"DROP TRIGGER IF EXISTS {FTS_TABLE}_ad",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_ai", f"DROP TABLE IF EXISTS {FTS_TABLE}",
)
PG_DDL = (f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON occurrences USING gin (search_vector)",)
PG_DROP = (f"DROP INDEX IF EXISTS {PG_INDEX}",)


def outside_models(name: str | None, type_: str, *_: Any) -> bool:
    """Alembic's include_name: False for what this module manages by hand (the FTS5
    table and its shadow tables), which the models do not declare."""
    return not (type_ == "table" and name in SQLITE_FTS_TABLES) and not (
        type_ == "index" and name == PG_INDEX)


# ---- what is indexed ---------------------------------------------------------------


def _event_ranges(analysis: dict[str, Any]) -> list[tuple[int, int]]:
    events = [analysis.get("root_cause"), *(analysis.get("symptoms") or [])]
    ranges = []
    for event in events:
        if not isinstance(event, dict) or not isinstance(event.get("line_number"), int):
            continue
        line, frames = event["line_number"], len(event.get("frames") or [])
        before = min(MAX_EVENT_LINES, EVENT_LINES_BEFORE + 2 * frames)
        after = min(MAX_EVENT_LINES, EVENT_LINES_AFTER + 2 * frames)
        ranges.append((max(1, line - before), line + after))
    return ranges


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, stop in sorted(ranges):
        if merged and start <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return [(a, b) for a, b in merged]


_CHUNK = 64 << 10


def _spans(data: bytes, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The byte spans of 1-based inclusive line ranges (sorted, disjoint) of `data`.
    Skips to each range by counting newlines 64 KB at a time (C speed), then line by line
    inside one chunk: no Python loop over a 256 MB log's lines."""
    out: list[tuple[int, int]] = []
    line, pos, size = 1, 0, len(data)
    for start, stop in ranges:
        while line < start and pos + _CHUNK < size:  # whole chunks before the range
            newlines = data.count(b"\n", pos, pos + _CHUNK)
            if line + newlines >= start:
                break
            line, pos = line + newlines, pos + _CHUNK
        while line < start:  # then the lines of the chunk that holds its start
            found = data.find(b"\n", pos)
            if found < 0:
                return out
            line, pos = line + 1, found + 1
        end = pos
        for _ in range(stop - start + 1):
            found = data.find(b"\n", end)
            if found < 0:
                end = size
                break
            end = found + 1
        if end > pos:
            out.append((pos, end))
        line, pos = stop + 1, end
        if pos >= size:
            break
    return out


def _tail_start(data: bytes, lines: int) -> int:
    """Where the last `lines` lines of `data` start (found from the end)."""
    pos = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(lines):
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            return 0
    return pos + 1


def _clip_lines(chunk: bytes) -> str:
    lines = chunk.decode("utf-8", "replace").splitlines()
    return "\n".join(line[:MAX_LINE_CHARS] for line in lines)


def search_text(log: bytes, analysis: dict[str, Any]) -> str:
    """What is indexed of one stored (redacted) log: all of it when small, else the
    head, the lines around the analysis' events and the tail (module docstring)."""
    if len(log) <= WHOLE_LOG_BYTES:
        return _clip_lines(log)
    events = _merge(_event_ranges(analysis))
    spans = _spans(log, _merge([(1, HEAD_LINES), *events]))
    tail = _tail_start(log, TAIL_LINES)
    spans = [(a, min(b, tail)) for a, b in spans if a < tail]
    spans.append((max(tail, spans[-1][1] if spans else 0), len(log)))
    return _excerpt([log[a:b] for a, b in spans], _head_only(events))


# Bytes kept of one line while streaming: every character _clip_lines keeps, even at four
# bytes each, so a 200 MB line costs what the excerpt shows of it.
_KEPT_LINE_BYTES = 4 * MAX_LINE_CHARS


def search_text_of_stream(pieces: Iterable[bytes], log_bytes: int, analysis: dict[str, Any]) -> str:
    """search_text of a stored log read as it decompresses, for an upload that streamed
    in and was never held whole: the same excerpt, holding only the lines it keeps (the
    head's and the events' as they pass, the last TAIL_LINES in a ring)."""
    if log_bytes <= WHOLE_LOG_BYTES:
        return search_text(b"".join(pieces), analysis)
    events = _merge(_event_ranges(analysis))
    wanted = _merge([(1, HEAD_LINES), *events])
    kept: list[list[tuple[int, bytes]]] = [[] for _ in wanted]
    last: deque[tuple[int, bytes]] = deque(maxlen=TAIL_LINES)
    number, index, rest = 0, 0, b""
    for piece in chain(pieces, (None,)):  # None: the end, to flush the last line
        lines = (rest + piece).split(b"\n") if piece is not None else [rest] if rest else []
        rest = lines.pop()[:_KEPT_LINE_BYTES] if piece is not None else b""
        for line in lines:
            line = line[:_KEPT_LINE_BYTES]
            number += 1
            while index < len(wanted) and wanted[index][1] < number:
                index += 1
            if index < len(wanted) and wanted[index][0] <= number:
                kept[index].append((number, line))
            last.append((number, line))
    tail = last[0][0] if last else number + 1
    spans = [[line for n, line in lines if n < tail] for lines in kept]
    spans = [lines for lines in spans if lines]
    spans.append([line for _, line in last])
    return _excerpt([b"\n".join(lines) for lines in spans], _head_only(events))


def _head_only(events: list[tuple[int, int]]) -> bool:
    return not any(start <= HEAD_LINES + 1 for start, _ in events)


def _excerpt(spans: list[bytes], head_only: bool) -> str:
    """The spans' text within MAX_EXCERPT_BYTES: the budget goes to the events first,
    then the tail (the last span), then a head without events (the first)."""
    order = sorted(range(len(spans)), key=lambda i: (
        1 if i == len(spans) - 1 else 2 if i == 0 and head_only else 0, i))
    parts: dict[int, str] = {}
    size = 0
    for i in order:
        piece = _clip_lines(spans[i])
        if size + len(piece) > MAX_EXCERPT_BYTES:
            piece = piece[:max(0, MAX_EXCERPT_BYTES - size)].rpartition("\n")[0]
        if piece:
            parts[i] = piece
            size += len(piece.encode()) + 1
    return "\n".join(parts[i] for i in sorted(parts))


def search_words(text_: str | None) -> str | None:
    """The search vector of an excerpt, as tsvector text: its words, lowercased, each
    with as many positions as it has repeats, up to RANKED_REPEATS (module docstring).
    None for no text."""
    if text_ is None:
        return None
    # No word spans whitespace, and a log repeats most whitespace-separated pieces: the
    # regex reads each distinct piece once.
    counts: Counter[str] = Counter()
    for piece, times in Counter(text_.lower().split()).items():
        for word in _WORDS.findall(piece):
            counts[word] += times
    # How often a word occurs, as that many positions (up to RANKED_REPEATS): what
    # ts_rank counts, so a log that says it more often ranks higher, as with bm25
    return " ".join(f"{word}:{_POSITIONS[min(times, RANKED_REPEATS)]}"
                    for word, times in counts.items() if len(word) <= MAX_WORD_CHARS)


def with_search_vector(dialect: str, values: dict[str, Any]) -> dict[str, Any]:
    """An occurrence's column values with the search vector its excerpt makes, on the
    database that indexes one (Postgres; SQLite's FTS5 reads search_text itself)."""
    if dialect == "postgresql" and "search_text" in values:
        return {**values, "search_vector": search_words(values["search_text"])}
    return values


# ---- querying ----------------------------------------------------------------------


def search_terms(query: str | None) -> list[str]:
    """The terms a query searches the logs for: whitespace-separated, each at least
    MIN_TERM_CHARS long (shorter ones cannot be found by trigrams), at most MAX_TERMS."""
    terms: list[str] = []
    for term in (query or "").split():
        term = term[:MAX_TERM_CHARS]
        if len(term) >= MIN_TERM_CHARS and term.casefold() not in {t.casefold() for t in terms}:
            terms.append(term)
    return terms[:MAX_TERMS]


def _like_literal(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_FTS = table(FTS_TABLE, column("rowid"))


def ranked_occurrences(dialect: str, terms: Sequence[str]) -> Select[Any]:
    """(occurrence id, incident id, score) of the occurrences whose text holds every
    term; lower score ranks first."""
    if dialect == "sqlite":
        fts = literal_column(FTS_TABLE)
        match = " ".join('"' + term.replace('"', '""') + '"' for term in terms)
        # FTS5's hidden `rank` column is bm25() as a value: unlike the function, it may
        # be grouped and windowed in the queries around this one.
        return (select(Occurrence.id.label("occurrence_id"), Occurrence.incident_id,
                       literal_column(f"{FTS_TABLE}.rank").label("score"))
                .select_from(_FTS.join(Occurrence.__table__, Occurrence.id == _FTS.c.rowid))
                .where(fts.op("MATCH")(match)))
    document = Occurrence.search_vector
    literal = [Occurrence.search_text.ilike(f"%{_like_literal(t)}%", escape="\\") for t in terms]
    tokens = [_pg_tsquery(t) for t in terms]
    wanted = " & ".join(t for t in tokens if t)
    columns = (Occurrence.id.label("occurrence_id"), Occurrence.incident_id)
    if not wanted:  # only punctuation: nothing for the index, the literal match alone
        return select(*columns, literal_column("0.0").label("score")).where(
            Occurrence.search_text.is_not(None), and_(*literal))
    query = func.to_tsquery(literal_column("'simple'::regconfig"), wanted)
    return (select(*columns, (-func.ts_rank(document, query)).label("score"))
            .where(document.op("@@")(query), and_(*literal)))


def _pg_tsquery(term: str) -> str:
    """The tokens of one term as a tsquery, AND-ed: a necessary condition for the
    literal match. The last token may be the start of a longer one (`:*`); the first
    may be the end of one, so it is left out when others remain."""
    words = [w for w in _WORDS.findall(term.lower()) if len(w) <= MAX_WORD_CHARS]
    if len(words) > 1 and term[:1].isalnum():
        words = words[1:]
    if not words:
        return ""
    return " & ".join(words[:-1] + [words[-1] + ":*"])


def incident_scores(dialect: str, terms: Sequence[str]) -> Any:
    """(incident_id, score) subquery: each incident's best matching occurrence."""
    hits = ranked_occurrences(dialect, terms).subquery("log_hits")
    return (select(hits.c.incident_id, func.min(hits.c.score).label("score"))
            .group_by(hits.c.incident_id).subquery("log_scores"))


@dataclass(slots=True)
class LogMatch:
    """Where an incident's logs matched a search: the best occurrence and its line."""

    occurrence_id: int
    line: str


def matching_line(text_: str, terms: Sequence[str]) -> str:
    """The line of `text_` holding the most terms (the first such), trimmed around the
    first term it holds to at most SHOWN_LINE_CHARS characters."""
    folded = [t.casefold() for t in terms]
    best, best_count = "", 0
    for line in text_.splitlines():
        lower = line.casefold()
        count = sum(1 for t in folded if t in lower)
        if count > best_count:
            best, best_count = line, count
            if count == len(folded):
                break
    best = best.strip()
    if len(best) <= SHOWN_LINE_CHARS:
        return best
    lower = best.casefold()
    at = min((lower.find(t) for t in folded if t in lower), default=0)
    start = max(0, at - SHOWN_LINE_CHARS // 3)
    shown = best[start:start + SHOWN_LINE_CHARS]
    return ("…" if start else "") + shown + ("…" if start + SHOWN_LINE_CHARS < len(best) else "")


def best_matches(session: Session, terms: Sequence[str], incident_ids: Iterable[int]
                 ) -> dict[int, LogMatch]:
    """For each of `incident_ids` whose logs match, its best occurrence and the line
    that matched (one query: the best row per incident by a window function)."""
    ids = list(set(incident_ids))
    if not ids or not terms:
        return {}
    dialect = session.get_bind().dialect.name
    hits = ranked_occurrences(dialect, terms).where(Occurrence.incident_id.in_(ids)).subquery()
    numbered = select(hits.c.occurrence_id, hits.c.incident_id, func.row_number().over(
        partition_by=hits.c.incident_id, order_by=(hits.c.score, hits.c.occurrence_id.desc())
    ).label("n")).subquery()
    rows = session.execute(
        select(numbered.c.incident_id, numbered.c.occurrence_id, Occurrence.search_text)
        .join(Occurrence, Occurrence.id == numbered.c.occurrence_id).where(numbered.c.n == 1))
    return {incident_id: LogMatch(occurrence_id, matching_line(body or "", terms))
            for incident_id, occurrence_id, body in rows}


def create_index(connection: Any) -> None:
    """The full-text index of the connection's database (migration 0007)."""
    for statement in SQLITE_DDL if connection.dialect.name == "sqlite" else PG_DDL:
        connection.execute(text(statement))


def drop_index(connection: Any) -> None:
    for statement in SQLITE_DROP if connection.dialect.name == "sqlite" else PG_DROP:
        connection.execute(text(statement))
