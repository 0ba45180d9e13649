"""The idempotent replay: a repeated Idempotency-Key answered with the first upload's
incident and occurrence, storing nothing (kb.services.ingest says when it is looked up)."""

from __future__ import annotations

from kb.db.models import Occurrence
from kb.db.repositories import Repository
from kb.db.session import Database
from kb.services.advice import advise, where_at
from kb.services.answers import SIMILAR_SHOWN, incident_ref
from kb.services.matching import similar_incidents
from kb.services.views import MatchView, OccurrenceRef, UploadResult


def replayed_upload(db: Database, idempotency_key: str, *,
                    candidate_limit: int = 200) -> UploadResult | None:
    """The answer of the upload already stored under this key, or None (cheap: looked
    up before the analysis)."""
    with db.read() as session:
        repo = Repository(session)
        first = repo.occurrence_by_idempotency_key(idempotency_key)
        return _replay(repo, first, candidate_limit) if first is not None else None


def _replay(repo: Repository, first: Occurrence, candidate_limit: int) -> UploadResult:
    """The answer to a repeated idempotency key: the first upload's incident (where merges
    have taken it), occurrence, analysis and match verdict; its fixes and recommendation
    as they stand now. Stores nothing."""
    incident = repo.incident(repo.live_incident_id(first.incident_id))
    assert incident is not None  # occurrences are deleted with their incident
    similar = similar_incidents(repo, incident.id, repo.fingerprints_of(incident.id),
                                candidate_limit, SIMILAR_SHOWN)
    status = first.match_status
    matched_id = incident.id if status == "known" else (
        similar[0].incident_id if status == "similar" and similar else None)
    where = where_at(first.engine, first.engine_version, first.model_arch, first.gpu_name)
    fixes, recommendation = advise(repo, incident, where, "known")
    return UploadResult(
        incident=incident_ref(incident), occurrence=OccurrenceRef(first.id),
        analysis=first.analysis,
        match=MatchView(status, matched_id, first.match_score or 0.0,
                        [f"repeated upload (same Idempotency-Key): the answer of occurrence "
                         f"#{first.id}; nothing stored again"]),
        similar=similar, fixes=fixes, recommendation=recommendation, created=False,
        replayed=True)
