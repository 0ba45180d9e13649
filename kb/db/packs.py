"""Queries of knowledge packs (kb.services.packs): what an export reads, what an import
compares against. No policy here."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from kb.db.models import FixOutcome, Incident, Occurrence


def live_incidents(session: Session, ids: Iterable[int] | None = None) -> list[Incident]:
    """Incidents not merged into another one (all, or those of `ids`), by id."""
    query = select(Incident).where(Incident.merged_into_id.is_(None)).order_by(Incident.id)
    if ids is not None:
        query = query.where(Incident.id.in_(list(ids)))
    return list(session.execute(query).scalars())


def outcomes_of(session: Session, fix_ids: Iterable[int]) -> dict[int, list[FixOutcome]]:
    """The recorded outcomes of each fix, oldest first."""
    out: dict[int, list[FixOutcome]] = {}
    ids = list(fix_ids)
    if not ids:
        return out
    rows = session.execute(select(FixOutcome).where(FixOutcome.fix_id.in_(ids))
                           .order_by(FixOutcome.created_at, FixOutcome.id)).scalars()
    for outcome in rows:
        out.setdefault(outcome.fix_id, []).append(outcome)
    return out


def example_logs(session: Session, incident_id: int, limit: int) -> list[tuple[int, str | None, bytes]]:
    """(occurrence id, fingerprint hash, compressed redacted log) of the newest occurrence
    of each of the incident's fingerprints, at most `limit`, newest first."""
    rows = session.execute(
        select(Occurrence.id, Occurrence.fingerprint_hash)
        .where(Occurrence.incident_id == incident_id)
        .order_by(Occurrence.created_at.desc(), Occurrence.id.desc()).limit(500))
    chosen: dict[str | None, int] = {}
    for occurrence_id, fingerprint in rows:
        if fingerprint not in chosen and len(chosen) < limit:
            chosen[fingerprint] = occurrence_id
    if not chosen:
        return []
    logs = {row[0]: row[1] for row in session.execute(
        select(Occurrence.id, Occurrence.log_compressed).where(Occurrence.id.in_(list(chosen.values()))))}
    return [(oid, fp, logs[oid]) for fp, oid in chosen.items()]
