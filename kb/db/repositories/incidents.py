"""Incidents as rows: looked up, added, followed through merges and chains, counted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select

from kb.db.models import Incident
from kb.db.repositories.base import RepositoryBase


class IncidentQueries(RepositoryBase):
    def incident(self, incident_id: int, *, lock: bool = False) -> Incident | None:
        if not lock:
            return self.s.get(Incident, incident_id)  # the identity map saves a query
        query = select(Incident).where(Incident.id == incident_id)
        if self.dialect == "postgresql":
            query = query.with_for_update()
        return self.s.execute(query).scalar_one_or_none()

    def incident_by_slug(self, slug: str) -> Incident | None:
        return self.s.execute(select(Incident).where(Incident.slug == slug)).scalar_one_or_none()

    def live_incident_id(self, incident_id: int) -> int:
        """Follow merges to the incident that absorbed this one."""
        seen = {incident_id}
        current = incident_id
        while True:
            target = self.s.execute(select(Incident.merged_into_id).where(
                Incident.id == current)).scalar_one_or_none()
            if target is None or target in seen:
                return current
            seen.add(target)
            current = target

    def add_incident(self, **values: Any) -> Incident:
        incident = Incident(**values)
        self.s.add(incident)
        self.s.flush()
        return incident

    def titles(self, ids: Iterable[int]) -> dict[int, tuple[str, bool]]:
        ids = list(set(ids))
        if not ids:
            return {}
        rows = self.s.execute(select(Incident.id, Incident.title, Incident.engine_limitation)
                              .where(Incident.id.in_(ids)))
        return {r[0]: (r[1], r[2]) for r in rows}

    def seeded_among(self, ids: Iterable[int]) -> set[int]:
        ids = list(set(ids))
        if not ids:
            return set()
        return set(self.s.execute(select(Incident.id).where(
            Incident.id.in_(ids), Incident.seeded.is_(True))).scalars())

    def live_ids(self, ids: Iterable[int]) -> set[int]:
        ids = list(set(ids))
        if not ids:
            return set()
        return set(self.s.execute(select(Incident.id).where(
            Incident.id.in_(ids), Incident.merged_into_id.is_(None))).scalars())

    def chain(self, incident_id: int, next_incident_id: int | None, max_hops: int = 10
              ) -> list[Incident]:
        """The incidents known to follow this one once it is fixed, in order."""
        out: list[Incident] = []
        seen = {incident_id}
        while next_incident_id is not None and len(out) < max_hops:
            nxt_id = self.live_incident_id(next_incident_id)
            if nxt_id in seen:
                break
            seen.add(nxt_id)
            current = self.s.get(Incident, nxt_id)
            if current is None:
                break
            out.append(current)
            next_incident_id = current.next_incident_id
        return out

    def previous(self, incident_id: int) -> list[Incident]:
        return list(self.s.execute(select(Incident).where(
            Incident.next_incident_id == incident_id, Incident.merged_into_id.is_(None))
            .order_by(Incident.id)).scalars())

    def seeded_incidents(self) -> list[Incident]:
        return list(self.s.execute(select(Incident).where(Incident.seeded.is_(True))).scalars())

    def count_incidents(self) -> int:
        return self.s.execute(select(func.count()).select_from(Incident)).scalar_one()
