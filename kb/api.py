"""`kb.analyze`: the offline half of the public Python API (docs/python-api.md).

The log goes through the one text-log check (kb.core.textlog) and then the analysis
core, so a script gets exactly what `kb analyze` and the service see, and an empty or
binary log is refused with the same `LogRejected` and the same words. Nothing here
touches the network, the database or the web stack."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb.core.records import Analysis

# A log as a caller holds it: its bytes (plain or gzip), its text, or a path to the file.
LogInput = bytes | bytearray | memoryview | str | os.PathLike

_NO_LIMIT = 2**62  # "no limit" for textlog's gzip bound (zlib takes a C ssize_t)


def log_bytes(log: LogInput) -> bytes:
    """The bytes of a log given as bytes, text or a path (a `str` is always log text)."""
    if isinstance(log, bytes):
        return log
    if isinstance(log, bytearray | memoryview):
        return bytes(log)
    if isinstance(log, str):
        check_not_a_path(log)
        try:
            return log.encode("utf-8", "surrogateescape")  # text read with surrogateescape: its bytes
        except UnicodeEncodeError:
            return log.encode("utf-8", "replace")
    if isinstance(log, os.PathLike):
        return Path(log).read_bytes()
    raise TypeError(f"a log is bytes, str (its text) or a pathlib.Path, not {type(log).__name__}")


def check_not_a_path(text: str) -> None:
    """A one-line `str` naming an existing file was meant as a path: say so instead of
    analysing the file's name (which finds nothing, silently)."""
    if "\n" in text or len(text) > 4096:
        return
    try:
        exists = os.path.isfile(text)
    except (OSError, ValueError):  # NUL bytes, names too long
        return
    if exists:
        raise TypeError(f"a str is the log's text, and {text!r} names a file: "
                        f"pass pathlib.Path({text!r}) to analyze the file")


def analyze(log: LogInput, *, max_bytes: int | None = None) -> Analysis:
    """Analyze a crash log offline: root cause, fingerprint, context, phase, timing.

    `log` is the log's bytes (plain text, UTF-16 or gzip, detected from the bytes), its
    text as a `str` (never a file name), or a `pathlib.Path` (any `os.PathLike`) to read.
    A path with no `max_bytes` is read in chunks, as `kb analyze FILE` does, so a log of
    gigabytes never sits in memory.

    `max_bytes` (None: no limit) refuses a larger log, before and after gzip
    decompression, as the service does with KB_MAX_UPLOAD_MB.

    Raises `kb.EmptyLog`, `kb.NotTextLog` or `kb.LogTooLarge` (all `kb.LogRejected`, a
    `ValueError`) with the message the service gives for the same upload, `TypeError`
    for an unsupported argument and `OSError` when a path cannot be read."""
    if max_bytes is not None and max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    if isinstance(log, os.PathLike):
        path = Path(log)
        if max_bytes is None:
            from kb.commands.analysis import analyze_stream

            with path.open("rb") as stream:
                return analyze_stream(stream)
        if path.stat().st_size > max_bytes:
            from kb.core.textlog import too_large

            raise too_large(max_bytes)
    data = log_bytes(log)
    from kb.core.analyze import analyze as analyze_bytes
    from kb.core.textlog import prepare_log

    return analyze_bytes(prepare_log(data, _NO_LIMIT if max_bytes is None else max_bytes))
