"""Turn a raw log line into (process, level, timestamp, body): first the capture layer
(kb.core.capture: ANSI, carriage returns, container/journald/launcher prefixes), then the
engine loggers' prefixes, layer by layer. Demultiplexing by `key` (capture stream and
process) lets two processes print tracebacks at the same time."""

from __future__ import annotations

from dataclasses import dataclass

from kb.core.capture import Peeled, Profile, peel
from kb.core.patterns import COLUMN_SOURCE, PREFIXES, by_first_char, starts_record

_MAX_LAYERS = 6


@dataclass(slots=True)
class LogLine:
    number: int  # 1-based line number in the input
    body: str  # text after all prefixes
    process: str | None = None
    level: str | None = None
    timestamp: str | None = None
    source: str | None = None  # "core.py:1029" of vLLM's logger
    header: bool = False  # a log-record header was stripped from this line
    engine: str | None = None  # the engine whose log format the prefix is
    stream: str | None = None  # the capture's label (srun task, MPI rank, container, host)
    host: str | None = None
    pieces: int = 1  # physical lines it was rejoined from (a hard-wrapped copy)
    layers: tuple[str, ...] = ()  # the capture layers peeled off it (kb.core.capture.Peeled)
    dropped: str = ""  # a glued or overwritten progress bar cut from its head (capture.clean_parts)
    wraps: bool = False  # a record whose message may go on, wrapped, on the next lines (Prefix.wraps)

    @property
    def record(self) -> tuple[str | None, str | None, str | None, str | None]:
        """Lines of one multi-line log record share this (stream, process, level, source)."""
        return (self.stream, self.process, self.level, self.source)

    @property
    def key(self) -> tuple[str | None, str | None]:
        """The stream a line belongs to: interleaved processes never mix their lines."""
        return (self.stream, self.process)


def parse_line(number: int, raw: str | Peeled, profile: Profile | None = None) -> LogLine:
    captured = raw if isinstance(raw, Peeled) else peel(raw, profile)
    text = captured.text
    if text[:1] == " " and text[1:2] in "[(" and starts_record(text[1:]):
        text = text[1:]  # a record's head pasted one column in (a paste that indented every line but the first)
    line = LogLine(number=number, body=text, stream=captured.stream, host=captured.host,
                   layers=captured.layers, dropped=captured.dropped)
    for _ in range(_MAX_LAYERS):
        stripped = False
        for prefix in _PREFIXES_BY_FIRST.get(text[:1], _PREFIXES_ANY_START):
            match = prefix.pattern.match(text)
            if match is None or match.end() == 0:
                continue
            groups = match.groupdict()
            if groups.get("proc") and line.process is None:
                line.process = groups["proc"].strip()
            level = groups.get("level") or groups.get("level2")
            if level:
                line.level = _LEVELS.get(level, level)
            if groups.get("ts") and line.timestamp is None:
                line.timestamp = groups["ts"]
            if groups.get("src") or groups.get("src2"):
                line.source = groups.get("src") or groups.get("src2")
            line.header = line.header or prefix.header
            line.engine = line.engine or prefix.engine
            text = text[match.end():]
            if prefix.wraps:  # the source column right-aligned at the end
                source = COLUMN_SOURCE.search(text)
                if source:
                    line.source = line.source or source["src"]
                    text = text[:source.start()]
                line.wraps = True
            elif prefix.name == "table-row":  # the cell's closing border
                text = text.rstrip().removesuffix("|")
            stripped = True
            break
        if not stripped:
            break
    line.body = text.rstrip()
    if line.timestamp is None:
        line.timestamp = captured.timestamp
    return line


_LEVELS = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "CRITICAL", "C": "CRITICAL", "WARN": "WARNING",
           "FATAL": "CRITICAL", "error": "ERROR", "Error": "ERROR", "fatal error": "CRITICAL", "fatal": "CRITICAL", "Fatal error": "CRITICAL",
           "warning": "WARNING", "Warning": "WARNING", "warn": "WARNING", "Warn": "WARNING", "info": "INFO",
           "Info": "INFO", "debug": "DEBUG", "Debug": "DEBUG", "trace": "DEBUG", "Trace": "DEBUG", "Critical": "CRITICAL",
           "critical": "CRITICAL", "SUCCESS": "INFO", "A": "CRITICAL", "V": "DEBUG", "D": "DEBUG",
           "TRC": "DEBUG", "DBG": "DEBUG", "INF": "INFO", "WRN": "WARNING", "ERR": "ERROR", "FTL": "CRITICAL", "PNC": "CRITICAL"}

_PREFIXES_BY_FIRST, _PREFIXES_ANY_START = by_first_char(PREFIXES)
