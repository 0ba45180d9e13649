"""Reading a log for `kb analyze`: the file (or standard input) in chunks through the
streaming analyzer, and the text to print. No command-line framework here, so the
console entry can run the common `kb analyze LOG [--json]` without loading one."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import BinaryIO

from kb.core import scan, textlog
from kb.core.analyze import Analyzer
from kb.core.records import Analysis

CHUNK = 16 * 1024 * 1024


def _cache_dir() -> Path | None:
    """Where compiled pre-filter databases are kept. On Linux the XDG rule is read here
    (what platformdirs answers, without its import on every `kb analyze`)."""
    try:
        if os.environ.get("KB_CACHE_DIR"):
            return Path(os.environ["KB_CACHE_DIR"])
        if sys.platform.startswith("linux"):
            return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crash-kb"
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("crash-kb"))
    except Exception:  # no home directory: compile every time
        return None


def analyze_stream(stream: BinaryIO) -> Analysis:
    """The analysis of a log read in chunks. An empty or binary log raises
    textlog.LogRejected with the message the service gives for the same upload."""
    scan.use_cache(_cache_dir())
    analyzer = Analyzer()
    buffer = bytearray(CHUNK)  # one buffer, refilled: the analyzer keeps no reference to it
    blank = True
    while size := stream.readinto(buffer):
        chunk = buffer if size == CHUNK else buffer[:size]
        if blank:
            if textlog.is_blank(chunk):
                continue  # leading blank chunks: the log may still say something
            blank = False
            # a short read is the end of the input: the whole log is in this chunk
            textlog.check_head(bytes(chunk[:textlog.SAMPLE]), complete=size < textlog.SAMPLE)
        analyzer.feed(chunk)
    if blank:
        raise textlog.EmptyLog("the log is empty")
    return analyzer.finish()


def open_log(log: str) -> BinaryIO:
    """The log file, or standard input for `-` (OSError when it cannot be read)."""
    return sys.stdin.buffer if log == "-" else open(log, "rb")


def render(result: Analysis, as_json: bool) -> str:
    if as_json:
        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False)
    from kb.commands.report import format_analysis

    return format_analysis(result)
