"""Turn a raw log line into (process, level, timestamp, body): strip ANSI colours,
progress-bar carriage returns, docker/timestamp/process/level prefixes, layer by layer.
Demultiplexing by `process` lets two processes print tracebacks at the same time."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.core.patterns import PREFIXES

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
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

    @property
    def record(self) -> tuple[str | None, str | None, str | None]:
        """Lines of one multi-line log record share this (process, level, source)."""
        return (self.process, self.level, self.source)


def clean(raw: str) -> str:
    """Drop ANSI codes and keep what a terminal would show after carriage returns."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    if "\r" in raw:
        raw = raw.rstrip("\r")
        if "\r" in raw:
            parts = [p for p in raw.split("\r") if p.strip()]
            raw = parts[-1] if parts else ""
    return raw


def parse_line(number: int, raw: str) -> LogLine:
    text = clean(raw)
    line = LogLine(number=number, body=text)
    container = None
    for _ in range(_MAX_LAYERS):
        stripped = False
        for prefix in _PREFIXES_BY_FIRST.get(text[:1], _PREFIXES_ANY_START):
            match = prefix.pattern.match(text)
            if match is None or match.end() == 0:
                continue
            groups = match.groupdict()
            if groups.get("proc") and line.process is None:
                line.process = groups["proc"].strip()
            if groups.get("container"):
                container = groups["container"]
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
            stripped = True
            break
        if not stripped:
            break
    line.body = text.rstrip()
    if line.process is None and container is not None:
        line.process = container  # docker compose service: the stream when no inner label
    return line


_LEVELS = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "CRITICAL", "WARN": "WARNING"}

# The prefixes that can apply to a line, by its first character, in PREFIXES' order: a
# line tries the few that can match instead of testing `starts` for all of them.
_PREFIXES_ANY_START = tuple(p for p in PREFIXES if not p.starts)
_PREFIXES_BY_FIRST = {
    char: tuple(p for p in PREFIXES if not p.starts or char in p.starts)
    for char in {c for p in PREFIXES for c in p.starts}
}
