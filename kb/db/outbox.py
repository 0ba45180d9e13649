"""The notification outbox: claiming due rows safely when several service processes
share it, and recording each delivery attempt.

A claim is a lease: the claiming process sets `locked_until` and the others skip the row
until then. On Postgres the claim selects FOR UPDATE SKIP LOCKED, so two processes
claiming at the same instant take different rows instead of waiting on each other; on
SQLite write transactions are serialized (BEGIN IMMEDIATE), which makes the select and
update one step already. A process that dies mid-delivery leaves its lease to expire; the
row is then delivered again (at least once: receivers get `event_id` to drop repeats).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from kb.db.models import NotificationDelivery, NotificationOutbox

RETRY_CAP = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Claimed:
    id: int
    target: str
    attempt: int  # this attempt's number, 1 for the first
    payload: dict[str, Any]


def _due(now: datetime) -> Any:
    return (NotificationOutbox.status == "pending", NotificationOutbox.next_attempt_at <= now,
            or_(NotificationOutbox.locked_until.is_(None), NotificationOutbox.locked_until <= now))


def any_due(session: Session, now: datetime) -> bool:
    """A cheap read first, so an idle poll never takes SQLite's write lock."""
    return session.execute(select(NotificationOutbox.id).where(*_due(now)).limit(1)).first() is not None


def claim(session: Session, now: datetime, lease: timedelta, limit: int) -> list[Claimed]:
    query = (select(NotificationOutbox).where(*_due(now))
             .order_by(NotificationOutbox.next_attempt_at, NotificationOutbox.id).limit(limit))
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    rows = session.scalars(query).all()
    for row in rows:
        row.locked_until = now + lease
    session.flush()
    return [Claimed(r.id, r.target, r.attempts + 1, dict(r.payload)) for r in rows]


def backoff(first: float, attempt: int) -> timedelta:
    """The wait after failed attempt `attempt` (1, 2, ...): first, 2x, 4x, ... at most an hour."""
    return min(timedelta(seconds=first * 2 ** (attempt - 1)), RETRY_CAP)


def record_attempt(session: Session, outbox_id: int, *, ok: bool, status_code: int | None,
                   error: str | None, duration_ms: float, now: datetime, retry_first: float,
                   max_attempts: int, give_up: bool = False) -> None:
    """Log one attempt and move the row on: delivered, retried later (exponential
    backoff), or failed after `max_attempts` (or at once, `give_up`: `dropped`)."""
    row = session.get(NotificationOutbox, outbox_id, with_for_update=True)
    if row is None:  # its incident was deleted meanwhile
        return
    row.attempts += 1
    row.locked_until = None
    row.last_status_code, row.last_error = status_code, error
    if ok:
        row.status, row.delivered_at = "delivered", now
    elif give_up:
        row.status = "dropped"
    elif row.attempts >= max_attempts:
        row.status = "failed"
    else:
        row.next_attempt_at = now + backoff(retry_first, row.attempts)
    session.add(NotificationDelivery(outbox_id=row.id, attempt=row.attempts, ok=ok,
                                     status_code=status_code, error=error,
                                     duration_ms=round(duration_ms, 1), created_at=now))


def prune(session: Session, before: datetime) -> int:
    """Delete settled notifications (delivered, failed, dropped) created before `before`,
    with their attempts (ON DELETE CASCADE); pending ones stay whatever their age."""
    result = session.execute(delete(NotificationOutbox).where(
        NotificationOutbox.status != "pending", NotificationOutbox.created_at < before))
    return result.rowcount or 0


def recent_notifications(session: Session, limit: int) -> list[NotificationOutbox]:
    return list(session.scalars(select(NotificationOutbox)
                                .order_by(NotificationOutbox.id.desc()).limit(limit)))


def recent_deliveries(session: Session, limit: int
                      ) -> list[tuple[NotificationDelivery, NotificationOutbox]]:
    rows = session.execute(select(NotificationDelivery, NotificationOutbox)
                           .join(NotificationOutbox,
                                 NotificationOutbox.id == NotificationDelivery.outbox_id)
                           .order_by(NotificationDelivery.id.desc()).limit(limit)).all()
    return [(r[0], r[1]) for r in rows]


__all__ = ["Claimed", "any_due", "backoff", "claim", "prune", "recent_deliveries",
           "recent_notifications", "record_attempt"]
