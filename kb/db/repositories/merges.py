"""Merges: the rows one incident's merge into another moves, moves back, and records."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select, update

from kb.db.models import Fix, IncidentFacet, IncidentFingerprint, IncidentMerge, Occurrence
from kb.db.repositories.facets import FacetQueries


class MergeQueries(FacetQueries):
    def move_incident_rows(self, source_id: int, target_id: int) -> dict[str, list[Any]]:
        """Occurrences, fixes and fingerprints of `source` now belong to `target`. Returns
        what moved (ids, and the source's facets), for the merge record."""
        moved: dict[str, list[Any]] = {}
        for name, model in (("occurrences", Occurrence), ("fixes", Fix),
                            ("fingerprints", IncidentFingerprint)):
            moved[name] = list(self.s.scalars(select(model.id).where(model.incident_id == source_id)))
            self.s.execute(update(model).where(model.incident_id == source_id)
                           .values(incident_id=target_id))
        moved["facets"] = [[k, v] for k, v in self.s.execute(
            select(IncidentFacet.kind, IncidentFacet.value).where(IncidentFacet.incident_id == source_id))]
        self.move_facets(source_id, target_id)
        return moved

    def restore_incident_rows(self, moved: dict[str, list[Any]], source_id: int) -> None:
        """The rows a merge moved go back to `source`, wherever later merges took them."""
        for name, model in (("occurrences", Occurrence), ("fixes", Fix),
                            ("fingerprints", IncidentFingerprint)):
            ids = [int(i) for i in moved.get(name) or []]
            for start in range(0, len(ids), 500):
                self.s.execute(update(model).where(model.id.in_(ids[start:start + 500]))
                               .values(incident_id=source_id))
        self.add_facets(source_id, [(k, v) for k, v in moved.get("facets") or []])

    def last_merge(self, source_id: int) -> IncidentMerge | None:
        """The merge that folded `source` away, when it is recorded and not undone."""
        return self.s.scalars(select(IncidentMerge).where(
            IncidentMerge.source_id == source_id, IncidentMerge.undone_at.is_(None))
            .order_by(IncidentMerge.id.desc()).limit(1)).first()

    def merges_of(self, incident_id: int) -> list[IncidentMerge]:
        return list(self.s.scalars(select(IncidentMerge).where(
            or_(IncidentMerge.source_id == incident_id, IncidentMerge.target_id == incident_id))
            .order_by(IncidentMerge.id)))
