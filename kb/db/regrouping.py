"""The queries `kb reanalyze` needs beyond kb.db.repositories: stored occurrences read
incident by incident in batches (one decompressed log at a time is the caller's job),
their re-analysis written back, occurrences moved, and what an incident's facets are
made of. No policy here: kb.services.reanalysis decides."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import Row, delete, select, update
from sqlalchemy.orm import Session

from kb.db import logsearch
from kb.db.models import Incident, IncidentFacet, IncidentMerge, Occurrence

BATCH = 200

_STORED = (Occurrence.id, Occurrence.created_at, Occurrence.fingerprint_hash, Occurrence.ruleset,
           Occurrence.analysis, Occurrence.log_compressed, Occurrence.engine,
           Occurrence.engine_version, Occurrence.model, Occurrence.model_arch, Occurrence.gpu_name,
           Occurrence.gpu_count, Occurrence.tp, Occurrence.dp, Occurrence.pp, Occurrence.ep,
           Occurrence.phase, Occurrence.search_text)


def live_incident_ids(session: Session) -> list[int]:
    """Every incident not merged away, oldest first: the order a re-analysis runs in."""
    return list(session.scalars(select(Incident.id).where(Incident.merged_into_id.is_(None))
                                .order_by(Incident.id)))


def stored_occurrences(session: Session, incident_id: int, batch: int = BATCH) -> Iterator[Row[Any]]:
    """The incident's occurrences with their logs and analysis-derived columns, by id, in
    batches (so a large incident never holds every log in memory)."""
    last = 0
    while True:
        rows = session.execute(select(*_STORED).where(Occurrence.incident_id == incident_id,
                                                      Occurrence.id > last)
                               .order_by(Occurrence.id).limit(batch)).all()
        if not rows:
            return
        yield from rows
        last = rows[-1].id


def update_occurrence(session: Session, occurrence_id: int, values: dict[str, Any]) -> None:
    values = logsearch.with_search_vector(session.get_bind().dialect.name, values)
    session.execute(update(Occurrence).where(Occurrence.id == occurrence_id).values(**values))


def move_occurrences(session: Session, ids: list[int], incident_id: int) -> None:
    for start in range(0, len(ids), 500):
        session.execute(update(Occurrence).where(Occurrence.id.in_(ids[start:start + 500]))
                        .values(incident_id=incident_id))


def occurrence_contexts(session: Session, incident_id: int) -> list[tuple[str | None, str | None, str | None]]:
    """(model_arch, gpu_name, engine_version) of the incident's occurrences, distinct:
    what its seen-on facets are made of."""
    rows = session.execute(select(Occurrence.model_arch, Occurrence.gpu_name, Occurrence.engine_version)
                           .where(Occurrence.incident_id == incident_id).distinct())
    return [(r[0], r[1], r[2]) for r in rows]


def facets_of_kinds(session: Session, incident_id: int, kinds: Iterable[str]) -> set[tuple[str, str]]:
    return {(k, v) for k, v in session.execute(
        select(IncidentFacet.kind, IncidentFacet.value).where(
            IncidentFacet.incident_id == incident_id, IncidentFacet.kind.in_(list(kinds))))}


def remove_facets(session: Session, incident_id: int, pairs: Iterable[tuple[str, str]]) -> None:
    for kind, value in pairs:
        session.execute(delete(IncidentFacet).where(
            IncidentFacet.incident_id == incident_id, IncidentFacet.kind == kind,
            IncidentFacet.value == value))


def live_merges(session: Session) -> list[IncidentMerge]:
    """Every recorded merge not undone (few: people make them by hand)."""
    return list(session.scalars(select(IncidentMerge).where(IncidentMerge.undone_at.is_(None))
                                .order_by(IncidentMerge.id)))


def undone_merges(session: Session) -> list[IncidentMerge]:
    return list(session.scalars(select(IncidentMerge).where(IncidentMerge.undone_at.is_not(None))
                                .order_by(IncidentMerge.id)))
