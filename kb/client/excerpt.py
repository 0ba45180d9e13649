"""A log too large for the service is sent as its head and its tail, never dropped: the
start-up says what was launched, the end holds the crash. The cut is marked in the log
itself, so the stored log and everyone reading it know lines are missing. Copied in
chunks: memory stays bounded whatever the log's size."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

CHUNK = 1 << 20
HEAD_SHARE = 0.25  # of the room: the rest goes to the tail, where crashes are
MARKER = "[kb: {cut} bytes of this log were cut here ({size} bytes in all): it was larger than the upload limit]\n"


def fits(path: Path, limit: int) -> bool:
    return path.stat().st_size <= limit


def excerpt(path: Path, limit: int, directory: Path | None = None) -> Path:
    """A new file of at most `limit` bytes: whole lines of the head, the marker, whole
    lines of the tail. The caller removes it."""
    size = path.stat().st_size
    room = max(limit - len(MARKER) - 64, 2)
    head_room, tail_room = int(room * HEAD_SHARE), room - int(room * HEAD_SHARE)
    handle, name = tempfile.mkstemp(prefix=".kb-excerpt-", suffix=".log", dir=directory)
    out = Path(name)
    try:
        with path.open("rb") as src, os.fdopen(handle, "wb") as dst:
            head = src.read(head_room)
            head = head[: head.rfind(b"\n") + 1] if b"\n" in head else head
            tail_start = max(size - tail_room, len(head))
            src.seek(tail_start)
            first = src.read(min(CHUNK, tail_room))
            if tail_start > len(head) and b"\n" in first:  # start the tail at a whole line
                skip = first.index(b"\n") + 1
                first, tail_start = first[skip:], tail_start + skip
            dst.write(head)
            dst.write(MARKER.format(cut=tail_start - len(head), size=size).encode())
            dst.write(first)
            while chunk := src.read(CHUNK):
                dst.write(chunk)
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    return out
