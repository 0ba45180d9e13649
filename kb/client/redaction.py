"""The client's side of redaction: nothing with a secret in it is written to the spool,
saved as kb's copy of a log, or sent. The rules are the core's (kb.core.redact), the
same the service applies on arrival; here they run before the bytes leave the host.

Logs can be gigabytes: they are redacted as streams, chunk by chunk (kb.core.redactlog),
never read whole."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from kb.core.redact import Redactor, may_hold_secret, redact_data, redact_fields
from kb.core.redactlog import redact_chunks

CHUNK = 1 << 20

__all__ = ["LineRedactor", "redact_bytes", "redact_data", "redact_fields", "redact_file", "redacted_copy"]


class LineRedactor:
    """Redact a log one line (bytes) at a time, as `kb run` saves it."""

    def __init__(self) -> None:
        self._redactor = Redactor()

    def line(self, line: bytes) -> bytes:
        """One line, its newline (if any) kept."""
        if not self._redactor.open and not may_hold_secret(line.decode("latin-1")):
            return line
        return _redact_line(self._redactor, line)

    def peek(self, line: bytes) -> bytes:
        """`line` redacted as the next line would be, without changing the state (for a
        line not finished yet)."""
        if not self._redactor.open and not may_hold_secret(line.decode("latin-1")):
            return line
        return _redact_line(self._redactor.copy(), line)


def _redact_line(redactor: Redactor, line: bytes) -> bytes:
    newline = line.endswith(b"\n")
    text, _ = redactor.line((line[:-1] if newline else line).decode("utf-8", "replace"))
    return text.encode("utf-8") + (b"\n" if newline else b"")


def redact_bytes(data: bytes) -> bytes:
    """A log held in memory, redacted (gzip inflated)."""
    return b"".join(redact_chunks(_pieces(data)))


def _pieces(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), CHUNK):
        yield data[start:start + CHUNK]


def _read(handle: BinaryIO) -> Iterator[bytes]:
    while True:
        chunk = handle.read(CHUNK)
        if not chunk:
            return
        yield chunk


def redact_file(source: Path, target: BinaryIO) -> None:
    """Write `source` redacted (gzip inflated) to `target`, a chunk at a time."""
    with source.open("rb") as handle:
        for out in redact_chunks(_read(handle)):
            target.write(out)


def redacted_copy(source: Path, directories: list[Path]) -> Path:
    """A private redacted copy of `source` in the first of `directories` that takes it
    (the caller removes it). Raises OSError when none does."""
    error: OSError | None = None
    for directory in directories:
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=".redacted-", suffix=".log", dir=directory)
        except OSError as exc:
            error = exc
            continue
        path = Path(name)
        try:
            with os.fdopen(fd, "wb") as target:
                redact_file(source, target)
                target.flush()
                os.fsync(target.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path
    raise error or OSError("no directory to write a redacted copy in")


def redacted_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """A spool entry's metadata with its fields (and anything else) redacted."""
    return redact_data(meta)
