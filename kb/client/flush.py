"""Deliver the spool: each entry once, retried with exponential backoff, deleted only
after the service confirmed it with a 2xx.

"Once" has two halves. Locally, an entry is sent only under its lock, so two concurrent
flushes never send the same entry. Across a lost answer (the service stored the log but
the reply never arrived), the entry's `Idempotency-Key` is the same on every attempt, so
the service can recognise the repeat.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kb.client.redaction import redact_file, redacted_meta
from kb.client.spool import LOG_NAME, Spool, SpoolEntry, new_idempotency_key
from kb.client.upload import UploadResult, upload

MAX_BACKOFF = 60.0


@dataclass(slots=True)
class EntryOutcome:
    entry_id: str
    status: str  # delivered | rejected | skipped_rejected | failed | locked | broken
    answer: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0


@dataclass(slots=True)
class FlushReport:
    outcomes: list[EntryOutcome] = field(default_factory=list)
    aborted: str | None = None  # why the flush stopped before the end of the spool
    remaining: int = 0  # entries still in the spool afterwards

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)


def backoff_delay(attempt: int, base: float, retry_after: float | None = None) -> float:
    """Exponential with full jitter on the upper half; a server's Retry-After wins if longer."""
    ceiling = min(MAX_BACKOFF, base * (2 ** (attempt - 1)))
    delay = ceiling / 2 + random.uniform(0, ceiling / 2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_BACKOFF))
    return delay


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _send_with_retries(
    entry: SpoolEntry,
    meta: dict[str, Any],
    *,
    server: str,
    token: str | None,
    retries: int,
    backoff: float,
    timeout: float,
    sleep: Callable[[float], None],
) -> tuple[UploadResult, int]:
    attempts = 0
    while True:
        attempts += 1
        result = upload(
            server,
            entry.log_path,
            {str(k): str(v) for k, v in (meta.get("fields") or {}).items()},
            token=token,
            idempotency_key=meta["idempotency_key"],
            timeout=timeout,
            filename=meta.get("filename") or "crash.log",
        )
        meta["attempts"] = int(meta.get("attempts") or 0) + 1
        meta["last_attempt_at"] = _now()
        if result.status != "transient" or attempts > retries:
            return result, attempts
        meta["last_error"] = result.error
        entry.write_meta(meta)
        sleep(backoff_delay(attempts, backoff, result.retry_after))


def _redact_entry(entry: SpoolEntry, meta: dict[str, Any]) -> dict[str, Any]:
    """Mask the secrets of an entry's log (in place, atomically) and metadata."""
    partial = entry.path / f".{LOG_NAME}.redacting"
    try:
        with partial.open("wb") as target:
            redact_file(entry.log_path, target)
            target.flush()
            os.fsync(target.fileno())
        os.replace(partial, entry.log_path)
    finally:
        partial.unlink(missing_ok=True)
    meta = redacted_meta(meta)
    meta["redacted"] = True
    entry.write_meta(meta)
    return meta


def flush(
    spool: Spool,
    *,
    server: str,
    token: str | None = None,
    retries: int = 4,
    backoff: float = 1.0,
    timeout: float = 60.0,
    retry_rejected: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    on_outcome: Callable[[EntryOutcome], None] | None = None,
) -> FlushReport:
    report = FlushReport()
    spool.cleanup()

    def record(outcome: EntryOutcome) -> None:
        report.outcomes.append(outcome)
        if on_outcome:
            on_outcome(outcome)

    for entry in spool.entries():
        with entry.lock() as held:
            if not held:
                if entry.exists():
                    record(EntryOutcome(entry.id, "locked", error="another kb flush is sending it"))
                continue
            try:
                meta = entry.read_meta()
            except (OSError, ValueError) as exc:
                record(EntryOutcome(entry.id, "broken", error=f"unreadable metadata: {exc}"))
                continue
            if meta.get("delivered"):  # confirmed earlier; only the deletion was interrupted
                entry.remove()
                continue
            if meta.get("rejected") and not retry_rejected:
                record(EntryOutcome(entry.id, "skipped_rejected", error=meta.get("last_error")))
                continue
            if not meta.get("idempotency_key"):
                meta["idempotency_key"] = new_idempotency_key()
                entry.write_meta(meta)
            if not meta.get("redacted"):  # the shell script's entry (or an older kb's)
                try:
                    meta = _redact_entry(entry, meta)
                except OSError as exc:
                    record(EntryOutcome(entry.id, "broken", error=f"cannot redact the log: {exc}"))
                    continue

            result, attempts = _send_with_retries(
                entry, meta, server=server, token=token, retries=retries, backoff=backoff, timeout=timeout, sleep=sleep
            )
            if result.ok:
                meta.update(delivered=True, delivered_at=_now(), http_status=result.http_status)
                entry.write_meta(meta)
                entry.remove()
                record(EntryOutcome(entry.id, "delivered", answer=result.answer, attempts=attempts))
                continue

            meta["last_error"] = result.error
            meta["http_status"] = result.http_status
            if result.status == "rejected":
                meta["rejected"] = True
            entry.write_meta(meta)
            status = "rejected" if result.status == "rejected" else "failed"
            record(EntryOutcome(entry.id, status, error=result.error, attempts=attempts))
            if result.status in ("transient", "unauthorized", "bad_url"):
                # The service is down or refuses our credentials: every later entry would
                # wait through the same retries for the same answer.
                report.aborted = result.error
                break

    report.remaining = len(spool.entries())
    return report
