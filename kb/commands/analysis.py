"""Reading a log for `kb analyze`: the file (or standard input) in chunks through the
streaming analyzer, and the text to print. No command-line framework here, so the
console entry can run the common `kb analyze LOG [--json]` without loading one."""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from kb.commands.cache import cache_dir
from kb.core import scan, textlog
from kb.core.analyze import Analyzer
from kb.core.records import Analysis

CHUNK = 16 * 1024 * 1024


def _chunks(stream: BinaryIO) -> Iterator[tuple[bytearray, int]]:
    """The stream's chunks (a buffer and how much of it was read), the next one read on
    another thread while the caller analyses this one: reading releases the GIL, so a
    large file costs the analysis almost no reading time. Two buffers take turns (the
    analyzer keeps no reference to a chunk), so a chunk is valid until the next is asked
    for. An error of the read is raised here, where the read would have raised it."""
    free: queue.SimpleQueue[bytearray | None] = queue.SimpleQueue()
    filled: queue.SimpleQueue[tuple[bytearray, int] | BaseException] = queue.SimpleQueue()
    for _ in range(2):
        free.put(bytearray(CHUNK))

    def read() -> None:
        while (buffer := free.get()) is not None:
            try:
                size = stream.readinto(buffer)
            except BaseException as exc:  # handed to the caller's thread
                filled.put(exc)
                return
            filled.put((buffer, size))
            if not size:
                return

    threading.Thread(target=read, name="kb-read", daemon=True).start()
    try:
        while True:
            item = filled.get()
            if isinstance(item, BaseException):
                raise item
            if not item[1]:
                return
            yield item
            free.put(item[0])
    finally:
        free.put(None)  # the reader stops at its next turn


def analyze_stream(stream: BinaryIO) -> Analysis:
    """The analysis of a log read in chunks. An empty or binary log raises
    textlog.LogRejected with the message the service gives for the same upload."""
    scan.use_cache(cache_dir())
    analyzer = Analyzer()
    blank = True
    for buffer, size in _chunks(stream):
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


def render(result: Analysis, as_json: bool, advice: bool = False) -> str:
    """The analysis as JSON, or as the readable report followed, with `advice`, by what
    the bundled knowledge base knows of the crash (the JSON stays the analysis alone)."""
    if as_json:
        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False)
    from kb.commands.report import format_analysis

    text = format_analysis(result)
    if advice:
        text += "\n\n" + local_advice(result)
    return text


def seeds_dir() -> Path:
    if os.environ.get("KB_SEEDS_DIR"):
        return Path(os.environ["KB_SEEDS_DIR"])
    from kb.config import default_seeds_dir

    return default_seeds_dir()


def local_advice(result: Analysis, *, root_cause: bool = False) -> str:
    """The known fixes and the recommendation from the bundled seeds, offline: the
    service's own matching and advice on a seeded SQLite file kept in the cache
    (`root_cause`: with the root-cause block, for a report that has not shown it)."""
    import msgspec

    from kb import textreport

    heading = "Crash KB, bundled knowledge (offline)"
    seeds, cache = seeds_dir(), cache_dir()
    if not seeds.is_dir() or cache is None:
        return f"{heading}: not available (no seeds at {seeds}, or no cache directory)\n"
    try:
        from kb.services.localkb import local_answer

        answer = msgspec.to_builtins(local_answer(result, seeds, cache))
    except Exception as exc:  # advice is extra: the analysis above stands without it
        return f"{heading}: not available ({type(exc).__name__}: {exc})\n"
    if answer.get("incident"):
        answer["incident"]["id"] = None  # the local database's ids mean nothing elsewhere
    for row in answer.get("similar") or []:
        row["incident_id"] = None
    return textreport.upload_report(answer, heading=heading, root_cause=root_cause).rstrip("\n")
