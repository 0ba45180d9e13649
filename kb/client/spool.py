"""The local spool: logs the service has not confirmed yet.

Layout (also written by scripts/kb-upload-on-failure.sh, so keep them in step):

    $KB_SPOOL_DIR/<entry id>/log         the log bytes as captured, secrets masked (kb.client.redaction)
    $KB_SPOOL_DIR/<entry id>/meta.json   {"version": 1, "idempotency_key": ..., "fields": {...},
                                          "redacted": true, ...}

An entry without `"redacted": true` (written by the shell script, or an older kb) is
redacted in place by `kb flush` before it is sent.
    $KB_SPOOL_DIR/<entry id>/lock        created by `kb flush` (flock) while it sends the entry

Entry ids start with the UTC creation time (`20250101T030000123456-<random>`), so they
sort oldest first. An entry appears atomically: it is written under a dot-name and renamed into place, so a
reader never sees half a log. It is removed only after the service answered 2xx, and
under its lock, so two flushes never send it twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kb.client.settings import ensure_private_dir

META_VERSION = 1
LOG_NAME = "log"
META_NAME = "meta.json"
LOCK_NAME = "lock"


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@dataclass(slots=True)
class SpoolEntry:
    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def log_path(self) -> Path:
        return self.path / LOG_NAME

    @property
    def meta_path(self) -> Path:
        return self.path / META_NAME

    def exists(self) -> bool:
        return self.meta_path.is_file() and self.log_path.is_file()

    def read_meta(self) -> dict[str, Any]:
        with self.meta_path.open(encoding="utf-8") as handle:
            meta = json.load(handle)
        if not isinstance(meta, dict):
            raise ValueError(f"{self.meta_path} is not a JSON object")
        return meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        _write_json_atomic(self.meta_path, meta)

    @contextmanager
    def lock(self) -> Iterator[bool]:
        """Hold the entry's lock if nobody else does. Yields False when another process
        holds it or the entry disappeared (another flush delivered it meanwhile)."""
        try:
            handle = open(self.path / LOCK_NAME, "a")  # noqa: SIM115 - held for the block
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            # The holder before us may have delivered and removed the entry while we waited.
            yield self.exists()
        finally:
            handle.close()

    def remove(self) -> None:
        """Delete a delivered entry. The rename makes it vanish from listings atomically."""
        trash = self.path.with_name(f".trash-{self.id}-{uuid.uuid4().hex[:8]}")
        os.replace(self.path, trash)
        shutil.rmtree(trash, ignore_errors=True)


class Spool:
    def __init__(self, root: Path) -> None:
        self.root = root

    def add(
        self,
        log: Path | bytes,
        fields: dict[str, str],
        *,
        idempotency_key: str,
        source: str,
        extra: dict[str, Any] | None = None,
        move: bool = False,
    ) -> SpoolEntry:
        """Store a log and what to send with it; the entry appears complete or not at all.
        With `move`, the log file is moved in (a copy made for this entry: on the same
        file system, no second copy of a large log) rather than copied."""
        ensure_private_dir(self.root)
        entry_id = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:12]}"
        tmp = self.root / f".tmp-{entry_id}"
        tmp.mkdir(mode=0o700)
        try:
            if isinstance(log, Path) and move:
                shutil.move(log, tmp / LOG_NAME)
            elif isinstance(log, Path):
                shutil.copyfile(log, tmp / LOG_NAME)
            else:
                (tmp / LOG_NAME).write_bytes(log)
            with (tmp / LOG_NAME).open("rb") as handle:
                os.fsync(handle.fileno())
            meta: dict[str, Any] = {
                "version": META_VERSION,
                "idempotency_key": idempotency_key,
                "fields": dict(fields),
                "source": source,
                "created_at": _now(),
                "attempts": 0,
            }
            meta.update(extra or {})
            _write_json_atomic(tmp / META_NAME, meta)
            final = self.root / entry_id
            os.rename(tmp, final)
            _fsync_dir(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return SpoolEntry(final)

    def entries(self) -> list[SpoolEntry]:
        """Complete entries, oldest first (ids start with their UTC creation time)."""
        if not self.root.is_dir():
            return []
        found = [
            SpoolEntry(path)
            for path in self.root.iterdir()
            if not path.name.startswith(".") and path.is_dir() and (path / META_NAME).is_file()
        ]
        return sorted(found, key=lambda entry: entry.id)

    def cleanup(self, stale_after: float = 24 * 3600) -> None:
        """Remove leftovers of interrupted writes and deletions (never a complete entry)."""
        if not self.root.is_dir():
            return
        now = datetime.now(UTC).timestamp()
        for path in self.root.iterdir():
            if path.name.startswith(".redacted-") and path.is_file():
                if now - path.stat().st_mtime > stale_after:  # a redacted copy an interrupted kb left
                    path.unlink(missing_ok=True)
            elif path.name.startswith(".trash-") or (
                path.name.startswith(".tmp-") and now - path.stat().st_mtime > stale_after
            ):
                shutil.rmtree(path, ignore_errors=True)
