"""What an upload tells people: a new incident, a regression, a spike, written to the
outbox (one row per webhook) inside the upload's own transaction, so an event is stored
exactly when its upload is, and delivered later by kb.services.delivery, never on the
upload's request path.

Spikes: `KB_SPIKE_PER_HOUR` occurrences of one incident within the last hour make one
`spike` event, and the incident then stays quiet for an hour (`spike_notified_at`),
however many more arrive. Counting the last hour on every upload would cost a query
each; the Notifier remembers, per incident, the total count and the hourly count it last
saw: the hourly count can grow by at most the growth of the total, so until the total
has grown by the difference to the threshold no query is needed (exact across processes:
the total is the database's). The fast Postgres path for known crashes
(kb.db.known_upload) commits in one statement of its own; its spike check follows in a
short transaction of its own: if the process dies in between, the next upload of that
incident checks again, so a spike is late, not lost.

An event links to its incident and log (`url`, `log_url`). The services know ids only:
the web layer binds each upload's Notifier to the links of the address the upload came
to (Notifier.linked, kb.web.links), and the payload is stored with them.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import event, func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from kb.config import Settings
from kb.db.models import Incident, NotificationOutbox, Occurrence
from kb.db.session import Database
from kb.services.webhooks import WebhookTarget, parse_targets

log = logging.getLogger("kb.notifications")
SPIKE_WINDOW = timedelta(hours=1)
_CACHE_LIMIT = 10_000


class EventLinks(Protocol):
    """Absolute URLs for an event's reader, made by the edge that knows the address."""

    def incident(self, incident_id: int) -> str: ...

    def occurrence_log(self, occurrence_id: int) -> str: ...


@dataclass(slots=True)
class _Seen:
    total: int  # the incident's occurrence count when last checked
    hourly: int  # its occurrences within the hour then
    quiet_until: datetime | None  # notified: no spike before this
    at: datetime


class Notifier:
    """The events of one service process: its webhooks, its spike threshold, and what it
    remembers to keep spike checks off most uploads. `wake` is called after a commit
    that stored notifications (the deliverer then sends them at once). `links` makes
    the events' URLs; without them an event carries none (null)."""

    def __init__(self, targets: tuple[WebhookTarget, ...], spike_per_hour: int = 0,
                 wake: Callable[[], None] | None = None, links: EventLinks | None = None) -> None:
        self.targets = targets
        self.spike_per_hour = spike_per_hour
        self.wake = wake
        self.links = links
        self._seen: dict[int, _Seen] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, wake: Callable[[], None] | None = None) -> Notifier:
        return cls(parse_targets(settings.webhooks), settings.spike_per_hour, wake)

    @property
    def enabled(self) -> bool:
        return bool(self.targets)

    def linked(self, links: EventLinks) -> Notifier:
        """This notifier, its events linking by `links` (the address one upload came to).
        It shares the process's spike memory: one per request, one memory per process."""
        bound = Notifier(self.targets, self.spike_per_hour, self.wake, links)
        bound._seen, bound._lock = self._seen, self._lock
        return bound

    def incident_url(self, incident_id: int) -> str | None:
        return self.links.incident(incident_id) if self.links is not None else None

    def log_url(self, occurrence_id: int) -> str | None:
        return self.links.occurrence_log(occurrence_id) if self.links is not None else None

    # ---- the outbox ------------------------------------------------------------------

    def record(self, session: Session, kind: str, incident_id: int, payload: dict[str, Any],
               now: datetime) -> None:
        """One outbox row per webhook for this event, in `session`'s transaction."""
        event_id = str(uuid.uuid4())
        payload = {"event": kind, "event_id": event_id, "at": now.isoformat(), **payload}
        session.add_all([NotificationOutbox(
            event_id=event_id, event=kind, incident_id=incident_id, target=t.key,
            target_label=t.label, payload=payload, status="pending", attempts=0,
            next_attempt_at=now, created_at=now) for t in self.targets])
        if self.wake is not None:
            event.listen(session, "after_commit", lambda _s: self.wake(), once=True)  # type: ignore[misc]

    # ---- spikes ----------------------------------------------------------------------

    def may_spike(self, incident_id: int, total: int, now: datetime) -> bool:
        """Whether the incident, at `total` occurrences, could have reached the threshold
        since it was last checked (False: no query needed)."""
        with self._lock:
            seen = self._seen.get(incident_id)
        if seen is None or now - seen.at > SPIKE_WINDOW:
            return True
        if seen.quiet_until is not None and now < seen.quiet_until:
            return False
        return total - seen.total >= self.spike_per_hour - seen.hourly

    def _remember(self, incident_id: int, seen: _Seen) -> None:
        with self._lock:
            if len(self._seen) >= _CACHE_LIMIT:
                self._seen.clear()
            self._seen[incident_id] = seen

    def check_spike(self, session: Session, incident_id: int, total: int, now: datetime,
                    payload: Callable[[int], dict[str, Any]]) -> bool:
        """Record a `spike` event when the incident has reached the threshold within the
        hour and was not notified within the hour. Run after the upload counted its
        occurrence (which holds the incident's row lock until commit). `payload(n)`
        makes the event's payload for n occurrences within the hour."""
        threshold = self.spike_per_hour
        if not (self.enabled and threshold) or not self.may_spike(incident_id, total, now):
            return False
        since = now - SPIKE_WINDOW
        recent = select(Occurrence.id).where(Occurrence.incident_id == incident_id,
                                             Occurrence.created_at > since).limit(threshold)
        hourly = session.execute(select(func.count()).select_from(recent.subquery())).scalar_one()
        if hourly < threshold:
            self._remember(incident_id, _Seen(total, hourly, None, now))
            return False
        notified = session.execute(update(Incident).where(
            Incident.id == incident_id,
            (Incident.spike_notified_at.is_(None)) | (Incident.spike_notified_at <= since))
            .values(spike_notified_at=now).returning(Incident.id)).first()
        if notified is None:  # another upload notified within the hour
            last = session.execute(select(Incident.spike_notified_at)
                                   .where(Incident.id == incident_id)).scalar()
            quiet = (last + SPIKE_WINDOW) if last else None
            self._remember(incident_id, _Seen(total, hourly, quiet, now))
            return False
        self.record(session, "spike", incident_id, payload(hourly), now)
        seen = _Seen(total, hourly, now + SPIKE_WINDOW, now)
        event.listen(session, "after_commit",
                     lambda _s: self._remember(incident_id, seen), once=True)  # type: ignore[misc]
        return True


def incident_payload(incident_id: int, title: str, url: str | None, *, engine: str | None = None,
                     occurrences: int | None = None, status: str = "open",
                     resolved_in: str | None = None) -> dict[str, Any]:
    return {"id": incident_id, "title": title, "url": url, "engine": engine,
            "occurrences": occurrences, "status": status, "resolved_in": resolved_in}


def occurrence_payload(occurrence_id: int | None, engine_version: str | None, url: str | None
                       ) -> dict[str, Any]:
    return {"id": occurrence_id, "engine_version": engine_version, "log_url": url}


def spike_after_fast_store(db: Database, notifier: Notifier | None, incident_id: int,
                           title: str, total: int, now: datetime) -> None:
    """The spike check of an upload the fast Postgres path stored (already committed):
    in a short transaction of its own, and only when the count could have reached it."""
    if notifier is None or not notifier.enabled or not notifier.spike_per_hour:
        return
    if not notifier.may_spike(incident_id, total, now):
        return
    try:
        with db.write() as session:
            notifier.check_spike(session, incident_id, total, now, lambda n: spike_payload(
                incident_payload(incident_id, title, notifier.incident_url(incident_id),
                                 occurrences=total), n,
                notifier.spike_per_hour))
    except SQLAlchemyError as exc:  # the upload is stored: answer it; the next one checks
        log.warning("spike check of incident %d failed: %s", incident_id,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def spike_payload(incident: dict[str, Any], hourly: int, threshold: int) -> dict[str, Any]:
    return {"incident": incident, "spike": {"occurrences": hourly, "threshold": threshold,
                                            "window_seconds": int(SPIKE_WINDOW.total_seconds())}}


__all__ = ["EventLinks", "Notifier", "SPIKE_WINDOW", "incident_payload", "occurrence_payload",
           "spike_after_fast_store", "spike_payload"]
