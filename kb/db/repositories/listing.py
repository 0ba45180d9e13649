"""The incident list: its filters, views (GET /incidents?view=), text and log search."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, case, exists, func, or_, select

from kb.db import logsearch
from kb.db.models import Fix, Incident, IncidentFacet, IncidentFingerprint, Occurrence
from kb.db.repositories.base import RepositoryBase


def _like_literal(text: str) -> str:
    """User text inside a LIKE pattern, its wildcards taken literally (escape: backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _has_occurrences() -> Any:
    return exists().where(Occurrence.incident_id == Incident.id)


def _needs_triage() -> Any:
    """Uploaded here and never identified: every fingerprint it has was stored by an
    upload whose analysis did not capture the cause (kb.services.ingest stores those
    with an empty exception: wrapper-only logs, logs without an error)."""
    identified = exists().where(IncidentFingerprint.incident_id == Incident.id,
                                IncidentFingerprint.exception != "")
    return and_(Incident.seeded.is_(False), _has_occurrences(), ~identified)


# The list's views (GET /incidents?view=): what a team looks at first.
_VIEWS = {
    "seen_here": _has_occurrences,  # uploaded here at least once
    "seeded": lambda: and_(Incident.seeded.is_(True), ~_has_occurrences()),  # curated, not seen here
    "needs_triage": _needs_triage,
}
VIEWS = tuple(_VIEWS)


class ListQueries(RepositoryBase):
    def list_incidents(self, *, q: str | None, engine: str | None, version_ids: set[int] | None,
                       version: str | None, model_arch: str | None, gpu: str | None,
                       phase: str | None, has_fix: bool | None, path: str | None,
                       tag: str | None, sort: str, offset: int, limit: int,
                       view: str | None = None, log_terms: Sequence[str] = (),
                       status: str | None = None
                       ) -> tuple[list[tuple[Incident, int]], int]:
        """One page of live incidents and the total. `q` searches the curated text
        (LIKE, wildcards escaped) and, by `log_terms`, the stored logs (kb.db.logsearch);
        sort "relevance" puts text matches first, then the best log matches."""
        fix_count = (select(func.count(Fix.id)).where(Fix.incident_id == Incident.id)
                     .correlate(Incident).scalar_subquery())
        conditions: list[Any] = [Incident.merged_into_id.is_(None)]
        log_scores = logsearch.incident_scores(self.dialect, log_terms) if q and log_terms else None
        text_match: Any = None
        if q:
            like = f"%{_like_literal(q.lower())}%"
            text_match = or_(*(func.lower(col).like(like, escape="\\") for col in (
                Incident.title, Incident.signature, Incident.summary, Incident.slug,
                Incident.notes, Incident.exception)))
            conditions.append(text_match if log_scores is None
                              else or_(text_match, log_scores.c.score.is_not(None)))
        if view:
            conditions.append(_VIEWS[view]())
        if engine:
            conditions.append(func.lower(Incident.engine) == engine.lower())
        if phase:
            conditions.append(Incident.phase == phase)
        if path:
            conditions.append(Incident.recommended_path == path)
        if status:
            conditions.append(Incident.status == status)
        if has_fix is not None:
            has = exists().where(Fix.incident_id == Incident.id)
            conditions.append(has if has_fix else ~has)

        def facet(kind: str, *values_: Any) -> Any:
            return exists().where(IncidentFacet.incident_id == Incident.id,
                                  IncidentFacet.kind == kind, or_(*values_))

        if model_arch:
            conditions.append(facet("model_arch", IncidentFacet.value == model_arch.lower()))
        if tag:
            conditions.append(facet("tag", IncidentFacet.value == tag.lower()))
        if gpu:
            g = gpu.lower()
            conditions.append(or_(facet("gpu", IncidentFacet.value.like(f"%{_like_literal(g)}%",
                                                                        escape="\\")),
                                  facet("gpu_family", IncidentFacet.value == g)))
        if version:
            v = version.lower().lstrip("v")
            seen_on = facet("engine_version", IncidentFacet.value == v,
                            IncidentFacet.value.like(f"{_like_literal(v)}.%", escape="\\"))
            conditions.append(or_(seen_on, Incident.id.in_(version_ids or {-1})))
        where = and_(*conditions)
        source: Any = Incident
        if log_scores is not None:
            source = Incident.__table__.outerjoin(log_scores, log_scores.c.incident_id == Incident.id)
        total = self.s.execute(select(func.count()).select_from(source).where(where)).scalar_one()
        order = {
            "occurrences": (Incident.occurrence_count.desc(), Incident.id.desc()),
            "created": (Incident.created_at.desc(), Incident.id.desc()),
            "id": (Incident.id.asc(),),
            "title": (Incident.title.asc(), Incident.id.asc()),
        }.get(sort) or (Incident.last_seen.desc().nulls_last(), Incident.id.desc())
        if sort == "relevance" and text_match is not None:
            ranked = [case((text_match, 0), else_=1)]
            if log_scores is not None:
                ranked.append(log_scores.c.score.asc().nulls_last())
            order = (*ranked, *order)
        rows = self.s.execute(select(Incident, fix_count).select_from(source).where(where)
                              .order_by(*order).offset(offset).limit(limit)).all()
        return [(r[0], r[1]) for r in rows], total

    def incidents_with_affected_versions(self, engine: str | None) -> list[tuple[int, str]]:
        """Curated incidents that declare an affected version range (few: the seeds)."""
        query = select(Incident.id, Incident.affected_versions).where(
            Incident.affected_versions.is_not(None), Incident.merged_into_id.is_(None))
        if engine:
            query = query.where(func.lower(Incident.engine) == engine.lower())
        return [(r[0], r[1]) for r in self.s.execute(query)]

    def log_matches(self, terms: Sequence[str], incident_ids: Iterable[int]
                    ) -> dict[int, logsearch.LogMatch]:
        """Log search (kb.db.logsearch): each incident's best matching occurrence and line."""
        return logsearch.best_matches(self.s, terms, incident_ids)
