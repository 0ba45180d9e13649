"""Resolving incidents, and telling a regression from an ordinary occurrence.

A person resolves an incident (in an engine version, in the version a fix upgrades to,
or without a version) and may reopen it. An upload that lands on a resolved incident is
checked against the resolution (kb.core.regression has the rule; the check runs in the
upload's transaction, kb.services.upload_events): a regression reopens the incident as
`regressed`, records the step in the history and notifies. Every step (resolved,
reopened, regressed) is kept in incident_resolutions.
"""

from __future__ import annotations

from kb.core.regression import parse_version
from kb.db.models import Fix, Incident, IncidentResolution, utcnow
from kb.db.repositories import Repository
from kb.db.session import Database
from kb.services.errors import Conflict, InvalidInput, NotFound
from kb.services.queries import STATUSES, detail_in
from kb.services.views import IncidentDetail, ResolveRequest



def _live_incident(repo: Repository, incident_id: int) -> Incident:
    incident = repo.incident(incident_id, lock=True)
    if incident is None:
        raise NotFound(f"incident {incident_id} does not exist")
    if incident.merged_into_id is not None:
        raise Conflict(f"incident {incident_id} was merged into "
                       f"#{repo.live_incident_id(incident.id)}: resolve that one")
    return incident


def exact_version(text: str | None) -> str | None:
    """`text` when all of it is a PEP 440 version (`v0.8.5` as `0.8.5`), else None (a
    pip requirement such as `torch>=2.5` is not an engine version)."""
    text = (text or "").strip().lstrip("vV")
    parsed = parse_version(text)
    return text if parsed is not None and parsed.public == text else None


def _fix_of(repo: Repository, incident: Incident, fix_id: int) -> Fix:
    fix = repo.fix(fix_id)
    if fix is None or fix.incident_id != incident.id:
        raise InvalidInput(f"fix {fix_id} is not a fix of incident {incident.id}", field="fix_id")
    return fix


def _fix_version(fix: Fix, incident: Incident) -> str:
    """The version a fix resolves in: the engine version an `upgrade` fix names, else the
    incident's `fixed_in`."""
    if fix.kind == "upgrade":
        version = exact_version((fix.change or {}).get("version"))
        if version:
            return version
    version = exact_version(incident.fixed_in)
    if version:
        return version
    raise InvalidInput(f"fix {fix.id} names no engine version to resolve in (only an upgrade "
                       "to an engine version does); give `version`", field="fix_id")


def resolve(db: Database, incident_id: int, request: ResolveRequest) -> IncidentDetail:
    """Mark an incident resolved (again: the new version replaces the old)."""
    version = None
    if (request.version or "").strip():
        version = exact_version(request.version)
        if version is None:
            raise InvalidInput("version must be a PEP 440 version such as 0.8.5, got "
                               f"{request.version[:60]!r}", field="version")  # type: ignore[index]
    with db.write() as session:
        repo = Repository(session)
        incident = _live_incident(repo, incident_id)
        if request.fix_id is not None:
            fix = _fix_of(repo, incident, request.fix_id)
            version = version or _fix_version(fix, incident)
        now = utcnow()
        incident.status, incident.resolved_in, incident.resolved_at = "resolved", version, now
        incident.regressed_at = None
        incident.updated_at = now
        session.add(IncidentResolution(incident_id=incident.id, action="resolved",
                                       version=version, fix_id=request.fix_id, created_at=now))
        session.flush()
        return detail_in(repo, incident.id)


def reopen(db: Database, incident_id: int) -> IncidentDetail:
    """Back to `open`: a resolution that was wrong, or a regression someone has taken up."""
    with db.write() as session:
        repo = Repository(session)
        incident = _live_incident(repo, incident_id)
        if incident.status == "open":
            raise Conflict(f"incident {incident_id} is open already")
        now = utcnow()
        incident.status, incident.resolved_in, incident.resolved_at = "open", None, None
        incident.regressed_at = None
        incident.updated_at = now
        session.add(IncidentResolution(incident_id=incident.id, action="reopened", created_at=now))
        session.flush()
        return detail_in(repo, incident.id)


__all__ = ["STATUSES", "exact_version", "reopen", "resolve"]
