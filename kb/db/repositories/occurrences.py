"""Occurrences: each stored upload of a crash, its log and analysis, and their counts
per day, version, GPU and model."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, insert, select

from kb.db import logsearch
from kb.db.models import Occurrence
from kb.db.repositories.base import RepositoryBase


_ADD_OCCURRENCE = insert(Occurrence).returning(Occurrence.id)


class OccurrenceQueries(RepositoryBase):
    def add_occurrence(self, values: dict[str, Any]) -> int:
        """Insert one occurrence (a Core insert: the log never enters the ORM)."""
        values = logsearch.with_search_vector(self.dialect, values)
        return self.s.connection().execute(_ADD_OCCURRENCE, values).scalar_one()

    def occurrences_of(self, incident_id: int, limit: int = 50) -> list[Occurrence]:
        # Load the context columns only: the analysis and the log stay on disk.
        cols = [c for c in Occurrence.__table__.columns
                if c.name not in {"analysis", "log_compressed", "search_text", "search_vector"}]
        rows = self.s.execute(select(*cols).where(Occurrence.incident_id == incident_id)
                              .order_by(Occurrence.created_at.desc(), Occurrence.id.desc())
                              .limit(limit)).mappings().all()
        return [Occurrence(**dict(r)) for r in rows]

    def occurrence_by_idempotency_key(self, key: str) -> Occurrence | None:
        """The occurrence an earlier upload with this Idempotency-Key stored (unique
        index), with its analysis but without the log."""
        cols = [c for c in Occurrence.__table__.columns
                if c.name not in {"log_compressed", "search_text", "search_vector"}]
        row = self.s.execute(select(*cols).where(Occurrence.idempotency_key == key)
                             ).mappings().first()
        return Occurrence(**dict(row)) if row is not None else None

    def latest_analysis(self, incident_id: int) -> dict[str, Any] | None:
        """The stored analysis of the incident's newest occurrence."""
        return self.s.execute(
            select(Occurrence.analysis).where(Occurrence.incident_id == incident_id)
            .order_by(Occurrence.created_at.desc(), Occurrence.id.desc()).limit(1)
        ).scalar_one_or_none()

    def daily_occurrences(self, incident_ids: Iterable[int], since: datetime
                          ) -> list[tuple[int, date, int]]:
        """(incident_id, UTC day, count) of occurrences since `since`: one grouped query
        on the (incident_id, created_at) index."""
        ids = list(set(incident_ids))
        if not ids:
            return []
        created = Occurrence.created_at
        if self.dialect == "postgresql":  # bucket by the UTC day, whatever the session zone
            day = func.date(func.timezone("UTC", created))
        else:
            day = func.date(created)  # SQLite stores UTC
        rows = self.s.execute(
            select(Occurrence.incident_id, day, func.count())
            .where(Occurrence.incident_id.in_(ids), created >= since)
            .group_by(Occurrence.incident_id, day))
        return [(r[0], date.fromisoformat(str(r[1])[:10]), r[2]) for r in rows]

    def occurrence_log(self, occurrence_id: int) -> bytes | None:
        return self.s.execute(select(Occurrence.log_compressed).where(
            Occurrence.id == occurrence_id)).scalar_one_or_none()

    def occurrence_breakdown(self, incident_id: int) -> dict[str, list[tuple[str | None, int]]]:
        """How many occurrences an incident has per engine version, GPU and model, most
        first: one grouped query per dimension on the incident's own rows."""
        out: dict[str, list[tuple[str | None, int]]] = {}
        for name, col in (("engine_version", Occurrence.engine_version),
                          ("gpu", Occurrence.gpu_name), ("model", Occurrence.model)):
            rows = self.s.execute(select(col, func.count()).where(Occurrence.incident_id == incident_id)
                                  .group_by(col).order_by(func.count().desc(), col))
            out[name] = [(r[0], int(r[1])) for r in rows]
        return out

    def occurrence_span(self, incident_id: int) -> tuple[int, datetime | None, datetime | None]:
        """How many occurrences an incident has, its first and its last."""
        count, first, last = self.s.execute(
            select(func.count(Occurrence.id), func.min(Occurrence.created_at), func.max(Occurrence.created_at))
            .where(Occurrence.incident_id == incident_id)).one()
        return int(count or 0), first, last
