"""Incident heads: the part of an incident an upload's answer and advice need, read by
the statement that finds the incident, and the counters each upload adds to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, Update, bindparam, func, select, update

from kb.db.models import Fix, Incident, IncidentFacet, IncidentFingerprint, UTCDateTime
from kb.db.repositories.incidents import IncidentQueries


@dataclass(slots=True)
class IncidentHead:
    """What an upload's answer and its advice need of the incident it lands on, read by
    the statement that finds the incident (no second query for the whole row)."""

    id: int
    title: str
    slug: str | None
    engine: str | None
    engine_limitation: bool
    next_incident_id: int | None
    occurrence_count: int
    first_seen: datetime | None
    last_seen: datetime | None
    fix_count: int
    facets: set[tuple[str, str]]


# The upload path runs these on every upload: built once, so each execution skips
# statement construction and reuses SQLAlchemy's memoized cache key.
_FACET_SEPARATOR, _KIND_SEPARATOR = "\x1e", "\x1f"
HEAD_COLUMNS = (
    Incident.id, Incident.title, Incident.slug, Incident.engine, Incident.engine_limitation,
    Incident.next_incident_id, Incident.occurrence_count, Incident.first_seen,
    Incident.last_seen,
    select(func.count(Fix.id)).where(Fix.incident_id == Incident.id).scalar_subquery()
    .label("fix_count"),
    select(func.aggregate_strings(IncidentFacet.kind + _KIND_SEPARATOR + IncidentFacet.value,
                                  _FACET_SEPARATOR))
    .where(IncidentFacet.incident_id == Incident.id).scalar_subquery().label("facets"),
)
_SEEN_AT = bindparam("seen_at", type_=UTCDateTime())


def routed(*columns: Any) -> Select[Any]:
    """`columns` of the incident the route key :route_key leads to."""
    return (select(*columns)
            .join(IncidentFingerprint, IncidentFingerprint.incident_id == Incident.id)
            .where(IncidentFingerprint.route_key == bindparam("route_key")))


def counting(which: Any) -> Update:
    """Count one more occurrence, seen at :seen_at, of the incident `which` selects, in
    one statement (no read-modify-write race), returning the counters as stored."""
    return (update(Incident).where(which)
            .values(occurrence_count=Incident.occurrence_count + 1, last_seen=_SEEN_AT,
                    first_seen=func.coalesce(Incident.first_seen, _SEEN_AT))
            .returning(Incident.occurrence_count, Incident.first_seen, Incident.last_seen))


_HEAD_BY_ROUTE = routed(Incident.merged_into_id, *HEAD_COLUMNS)
_HEAD_BY_ID = select(*HEAD_COLUMNS).where(Incident.id == bindparam("incident_id"))
_COUNT_OCCURRENCE = counting(Incident.id == bindparam("incident_id"))


def head_from_row(row: Sequence[Any]) -> IncidentHead:
    *columns, facets = row
    pairs = (item.partition(_KIND_SEPARATOR) for item in (facets or "").split(_FACET_SEPARATOR))
    return IncidentHead(*columns, facets={(kind, value) for kind, _, value in pairs if value})


class HeadQueries(IncidentQueries):
    def head_by_route(self, route_key: str) -> IncidentHead | None:
        """The live incident a fingerprint routes to (one indexed lookup)."""
        row = self.s.connection().execute(_HEAD_BY_ROUTE, {"route_key": route_key}).first()
        if row is None:
            return None
        if row[0] is not None:  # merges move fingerprints: only a merge chain made by hand
            return self.head(self.live_incident_id(row[1]))
        return head_from_row(row[1:])

    def head(self, incident_id: int) -> IncidentHead | None:
        row = self.s.connection().execute(_HEAD_BY_ID, {"incident_id": incident_id}).first()
        return head_from_row(row) if row is not None else None

    def count_occurrence(self, head: IncidentHead, when: datetime) -> None:
        """Count one more occurrence (`counting`) and put the stored counters on `head`.
        Uploads run it last before committing: it locks the incident's row until then."""
        row = self.s.connection().execute(
            _COUNT_OCCURRENCE, {"incident_id": head.id, "seen_at": when}).one()
        head.occurrence_count, head.first_seen, head.last_seen = row
