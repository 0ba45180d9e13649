"""Queries of the team dashboard (kb.services.dashboard): occurrences of a window of
days, grouped by incident, UTC day and the context the breakdowns split by, in one
statement on the occurrences' created_at; and the incidents they belong to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kb.db.models import Incident, Occurrence


@dataclass(slots=True)
class OccurrenceGroup:
    """How many occurrences of one incident, on one UTC day, had this context."""

    incident_id: int
    day: date
    engine: str | None
    engine_version: str | None
    model_arch: str | None
    gpu_name: str | None
    count: int


@dataclass(slots=True)
class IncidentRow:
    id: int
    title: str
    slug: str | None
    engine: str | None
    first_seen: datetime | None
    last_seen: datetime | None
    occurrence_count: int
    engine_limitation: bool
    recommended_path: str
    status: str  # open | resolved | regressed (kb.services.regressions)


def _utc_day(session: Session):  # type: ignore[no-untyped-def]
    created = Occurrence.created_at
    if session.get_bind().dialect.name == "postgresql":  # the UTC day, whatever the session zone
        return func.date(func.timezone("UTC", created))
    return func.date(created)  # SQLite stores UTC


def occurrence_groups(session: Session, since: datetime, until: datetime) -> list[OccurrenceGroup]:
    """Occurrences created in [since, until), grouped by incident, day and context."""
    day = _utc_day(session)
    columns = (Occurrence.incident_id, day, Occurrence.engine, Occurrence.engine_version,
               Occurrence.model_arch, Occurrence.gpu_name)
    rows = session.execute(
        select(*columns, func.count())
        .where(Occurrence.created_at >= since, Occurrence.created_at < until)
        .group_by(*columns))
    return [OccurrenceGroup(r[0], date.fromisoformat(str(r[1])[:10]), r[2], r[3], r[4], r[5], r[6])
            for r in rows]


def incident_rows(session: Session, ids: Iterable[int]) -> dict[int, IncidentRow]:
    ids = list(set(ids))
    if not ids:
        return {}
    rows = session.execute(select(
        Incident.id, Incident.title, Incident.slug, Incident.engine, Incident.first_seen,
        Incident.last_seen, Incident.occurrence_count, Incident.engine_limitation,
        Incident.recommended_path, Incident.status).where(Incident.id.in_(ids)))
    return {r[0]: IncidentRow(*r) for r in rows}
