"""Facets: the (kind, value) pairs an incident was seen on or tagged with."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from kb.db.models import IncidentFacet
from kb.db.repositories.base import RepositoryBase


def facet_values(pairs: Iterable[tuple[str, str | None]]) -> set[tuple[str, str]]:
    """(kind, value) facets as stored: blanks dropped, values lowercased and clipped."""
    return {(k, str(v).strip().lower()[:200]) for k, v in pairs if v and str(v).strip()}


_ADD_FACETS = {
    "postgresql": postgresql.insert(IncidentFacet).on_conflict_do_nothing(),
    "sqlite": sqlite.insert(IncidentFacet).on_conflict_do_nothing(),
}


class FacetQueries(RepositoryBase):
    def add_facets(self, incident_id: int, pairs: Iterable[tuple[str, str | None]]) -> None:
        rows = [{"incident_id": incident_id, "kind": k, "value": v} for k, v in facet_values(pairs)]
        if rows:  # one multi-row statement, one round trip
            self.s.connection().execute(_ADD_FACETS[self.dialect], rows)

    def replace_facets(self, incident_id: int, kind: str, values: Iterable[str]) -> None:
        wanted = {value for _, value in facet_values((kind, v) for v in values)}
        current = set(self.s.execute(select(IncidentFacet.value).where(
            IncidentFacet.incident_id == incident_id, IncidentFacet.kind == kind)).scalars())
        if current - wanted:
            self.s.execute(delete(IncidentFacet).where(
                IncidentFacet.incident_id == incident_id, IncidentFacet.kind == kind,
                IncidentFacet.value.in_(current - wanted)))
        self.add_facets(incident_id, [(kind, v) for v in wanted - current])

    def facets_of(self, incident_ids: Iterable[int], kinds: Iterable[str]
                  ) -> list[tuple[int, str, str]]:
        """(incident_id, kind, value) of these incidents, values sorted."""
        ids = list(set(incident_ids))
        if not ids:
            return []
        rows = self.s.execute(
            select(IncidentFacet.incident_id, IncidentFacet.kind, IncidentFacet.value)
            .where(IncidentFacet.incident_id.in_(ids), IncidentFacet.kind.in_(list(kinds)))
            .order_by(IncidentFacet.value))
        return [(r[0], r[1], r[2]) for r in rows]

    def move_facets(self, source_id: int, target_id: int) -> None:
        pairs = self.s.execute(select(IncidentFacet.kind, IncidentFacet.value).where(
            IncidentFacet.incident_id == source_id)).all()
        self.add_facets(target_id, [(k, v) for k, v in pairs])
