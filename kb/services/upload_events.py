"""What a stored upload means beyond its rows: a new incident, a regression of a resolved
one (kb.core.regression decides), a spike. Runs inside the upload's write transaction,
after the occurrence was counted (which holds the incident's row lock until commit, so a
concurrent resolve or upload waits), and writes the events to the outbox there
(kb.services.notifications): an event exists exactly when its upload does.

Without webhooks the regression is still recorded (status, history); only the outbox
rows are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from kb.core.regression import is_regression
from kb.db.models import Incident, IncidentResolution
from kb.services.notifications import (
    Notifier,
    incident_payload,
    occurrence_payload,
    spike_payload,
)


@dataclass(frozen=True, slots=True)
class Regression:
    resolved_in: str | None  # None: it was resolved without a version


_RESOLVED_IN = select(Incident.resolved_in).where(Incident.status == "resolved")


def check_regression(session: Session, incident_id: int, engine_version: str | None,
                     occurrence_id: int, now: datetime) -> Regression | None:
    """Reopen a resolved incident as `regressed` when this occurrence is a regression;
    None when it is not resolved, or the occurrence is from an older version."""
    row = session.execute(_RESOLVED_IN.where(Incident.id == incident_id)).first()
    if row is None or not is_regression(row[0], engine_version):
        return None
    session.execute(update(Incident).where(Incident.id == incident_id)
                    .values(status="regressed", regressed_at=now))
    session.add(IncidentResolution(incident_id=incident_id, action="regressed",
                                   version=engine_version, occurrence_id=occurrence_id,
                                   created_at=now))
    return Regression(row[0])


@dataclass(slots=True)
class StoredUpload:
    """Where an upload landed, as the events need it."""

    incident_id: int
    title: str
    engine: str | None
    created: bool  # a new incident
    occurrence_id: int
    engine_version: str | None
    occurrences: int  # the incident's count, this upload included


def record_upload_events(session: Session, notifier: Notifier | None, upload: StoredUpload,
                         now: datetime) -> None:
    regression = None if upload.created else check_regression(
        session, upload.incident_id, upload.engine_version, upload.occurrence_id, now)
    if notifier is None or not notifier.enabled:
        return
    occurrence = occurrence_payload(upload.occurrence_id, upload.engine_version,
                                    notifier.log_url(upload.occurrence_id))

    def incident(status: str = "open", resolved_in: str | None = None) -> dict[str, object]:
        return incident_payload(upload.incident_id, upload.title,
                                notifier.incident_url(upload.incident_id), engine=upload.engine,
                                occurrences=upload.occurrences, status=status,
                                resolved_in=resolved_in)

    if upload.created:
        notifier.record(session, "new_incident", upload.incident_id,
                        {"incident": incident(), "occurrence": occurrence}, now)
    elif regression is not None:
        notifier.record(session, "regression", upload.incident_id,
                        {"incident": incident("regressed", regression.resolved_in),
                         "occurrence": occurrence}, now)
    notifier.check_spike(session, upload.incident_id, upload.occurrences, now,
                         lambda n: spike_payload(incident(), n, notifier.spike_per_hour))


__all__ = ["Regression", "StoredUpload", "check_regression", "record_upload_events"]
