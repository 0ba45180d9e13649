"""The read side: the incident list, the incident detail, an occurrence's log and the
health check, assembled into the structs of kb.services.views. The JSON API returns
them as they are; the HTML pages render the same structs."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from kb import __version__
from kb.core.recommend import PATHS, Where, version_in
from kb.core.records import PHASES
from kb.db.logcodec import decompress_log
from kb.db.models import Incident, IncidentResolution, Occurrence
from kb.db.logsearch import search_terms
from kb.db.repositories import VIEWS, Repository
from kb.db.session import Database
from kb.services.advice import advise
from kb.services.errors import InvalidInput, NotFound
from kb.services.matching import similar_incidents
from kb.services.views import (
    CountView,
    FingerprintView,
    Health,
    IncidentDetail,
    IncidentList,
    IncidentSummary,
    LinkedIncident,
    ListQuery,
    LogMatchView,
    MergeView,
    OccurrenceBreakdown,
    OccurrenceView,
    ResolutionView,
    Timeline,
)

MAX_PER_PAGE = 200
MAX_PAGE = 1_000_000  # the offset stays far inside the databases' 64-bit range
STATUSES = ("open", "resolved", "regressed")  # kb.services.regressions
SORTS = ("last_seen", "occurrences", "created", "id", "title", "relevance")
# relevance: with `q`, incidents whose title, signature or notes hold it first, then by
# the rank of their best matching log (kb.db.logsearch); without `q`, as last_seen.
TIMELINE_DAYS = 30  # the list's occurrence timeline: this many UTC days, ending today
_SEEN_KINDS = {"engine_version": "versions", "model_arch": "model_archs", "gpu": "gpus"}


def _check(query: ListQuery) -> None:
    if not 1 <= query.page <= MAX_PAGE:
        raise InvalidInput(f"page must be between 1 and {MAX_PAGE}")
    if not 1 <= query.per_page <= MAX_PER_PAGE:
        raise InvalidInput(f"per_page must be between 1 and {MAX_PER_PAGE}")
    if query.path and query.path not in PATHS:
        raise InvalidInput(f"path must be one of {', '.join(PATHS)}")
    if query.phase and query.phase not in PHASES:
        raise InvalidInput(f"phase must be one of {', '.join(PHASES)}")
    if query.status and query.status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}")
    if query.sort not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)}")
    if query.q and "\x00" in query.q:
        raise InvalidInput("q must not contain NUL characters")
    if query.view and query.view not in VIEWS:
        raise InvalidInput(f"view must be one of {', '.join(VIEWS)}")


def list_incidents(db: Database, query: ListQuery, *,
                   today: date | None = None) -> IncidentList:
    """One page of incidents, each with the versions, architectures and GPUs it was seen
    on and its daily occurrences over the last TIMELINE_DAYS days (`today`: tests)."""
    _check(query)
    with db.read() as session:
        repo = Repository(session)
        version_ids: set[int] | None = None
        if query.version:
            # Curated incidents declare a version range; PEP 440 is checked here, on the
            # few rows that have one (seeds), not in SQL.
            version_ids = {i for i, spec in repo.incidents_with_affected_versions(query.engine)
                           if version_in(query.version, spec)}
        q = (query.q or "").strip() or None
        log_terms = search_terms(q)
        rows, total = repo.list_incidents(
            q=q, engine=query.engine, version_ids=version_ids,
            version=query.version, model_arch=query.model_arch, gpu=query.gpu,
            phase=query.phase, has_fix=query.has_fix, path=query.path, tag=query.tag,
            sort=query.sort, offset=(query.page - 1) * query.per_page, limit=query.per_page,
            view=query.view, log_terms=log_terms, status=query.status)
        items = [IncidentSummary(
            id=i.id, title=i.title, slug=i.slug,
            signature=i.signature, engine=i.engine, phase=i.phase, tags=list(i.tags or []),
            occurrences=i.occurrence_count, fixes=n_fixes, recommended_path=i.recommended_path,
            engine_limitation=i.engine_limitation, seeded=i.seeded, first_seen=i.first_seen,
            last_seen=i.last_seen, status=i.status) for i, n_fixes in rows]
        _add_seen_on(repo, items, today)
        if log_terms:
            matches = repo.log_matches(log_terms, (item.id for item in items))
            for item in items:
                found = matches.get(item.id)
                if found is not None:
                    item.log_match = LogMatchView(found.occurrence_id, found.line)
    filters = {k: v for k, v in (
        ("q", query.q), ("engine", query.engine), ("version", query.version),
        ("model_arch", query.model_arch), ("gpu", query.gpu), ("phase", query.phase),
        ("has_fix", query.has_fix), ("path", query.path), ("tag", query.tag),
        ("view", query.view), ("status", query.status)) if v is not None}
    return IncidentList(items=items, total=total, page=query.page, per_page=query.per_page,
                        filters=filters)


def _add_seen_on(repo: Repository, items: list[IncidentSummary], today: date | None) -> None:
    """Fill versions / model_archs / gpus and the timeline of one page of the list: two
    grouped queries on indexed columns, whatever the page size."""
    by_id = {item.id: item for item in items}
    today = today or datetime.now(UTC).date()
    start = today - timedelta(days=TIMELINE_DAYS - 1)
    for item in items:
        item.timeline = Timeline(start=start, days=TIMELINE_DAYS, counts=[0] * TIMELINE_DAYS)
    for incident_id, kind, value in repo.facets_of(by_id, _SEEN_KINDS):
        getattr(by_id[incident_id], _SEEN_KINDS[kind]).append(value)
    since = datetime.combine(start, datetime.min.time(), UTC)
    for incident_id, day, n in repo.daily_occurrences(by_id, since):
        index = (day - start).days
        timeline = by_id[incident_id].timeline
        if timeline is not None and 0 <= index < TIMELINE_DAYS:
            timeline.counts[index] += n


def _linked(incident: Incident) -> LinkedIncident:
    return LinkedIncident(incident.id, incident.title, incident.engine_limitation)


def _occurrence_view(o: Occurrence) -> OccurrenceView:
    return OccurrenceView(
        id=o.id, created_at=o.created_at, match_status=o.match_status, match_score=o.match_score,
        fingerprint_hash=o.fingerprint_hash, engine=o.engine, engine_version=o.engine_version,
        model=o.model, model_arch=o.model_arch, gpu_name=o.gpu_name, gpu_count=o.gpu_count,
        tp=o.tp, dp=o.dp, pp=o.pp, ep=o.ep, phase=o.phase, reporter=o.reporter, host=o.host,
        command=o.command, exit_code=o.exit_code, log_bytes=o.log_bytes, log_lines=o.log_lines,
        cuda_visible_devices=o.cuda_visible_devices, torch_version=o.torch_version,
        failure=o.failure, ruleset=o.ruleset)


def incident_detail(db: Database, incident_id: int, *,
                    candidate_limit: int = 200, occurrences: int = 50) -> IncidentDetail:
    with db.read() as session:
        return detail_in(Repository(session), incident_id,
                         candidate_limit=candidate_limit, occurrences=occurrences)


def detail_in(repo: Repository, incident_id: int, *, candidate_limit: int = 200,
              occurrences: int = 50) -> IncidentDetail:
    incident = repo.incident(incident_id)
    if incident is None:
        raise NotFound(f"incident {incident_id} does not exist")
    fingerprints = repo.fingerprints_of(incident.id)
    # Without a crash to advise on, the context is only the incident's engine.
    fixes, recommendation = advise(repo, incident, Where(engine=incident.engine), "known")
    merged_into = repo.incident(repo.live_incident_id(incident.id)) if incident.merged_into_id else None
    nxt = repo.incident(repo.live_incident_id(incident.next_incident_id)) \
        if incident.next_incident_id else None
    return IncidentDetail(
        id=incident.id, slug=incident.slug,
        title=incident.title, notes=incident.notes, tags=list(incident.tags or []),
        summary=incident.summary, links=list(incident.links or []), engine=incident.engine,
        affected_versions=incident.affected_versions, fixed_in=incident.fixed_in,
        model_archs=list(incident.model_archs or []),
        gpu_families=list(incident.gpu_families or []), phase=incident.phase,
        engine_limitation=incident.engine_limitation, seeded=incident.seeded,
        signature=incident.signature, exception=incident.exception,
        fingerprint_hash=incident.fingerprint_hash,
        fingerprint_version=incident.fingerprint_version,
        occurrence_count=incident.occurrence_count, first_seen=incident.first_seen,
        last_seen=incident.last_seen, created_at=incident.created_at,
        updated_at=incident.updated_at,
        merged_into=_linked(merged_into) if merged_into else None,
        next=_linked(nxt) if nxt else None,
        chain=[_linked(i) for i in repo.chain(incident.id, incident.next_incident_id)],
        previous=[_linked(i) for i in repo.previous(incident.id)],
        fingerprints=[FingerprintView(
            version=f.version, hash=f.hash, source=f.source, exception=f.exception,
            message_template=f.message_template, frames=list(f.frames or []), engine=f.engine,
            engine_version=f.engine_version, model_arch=f.model_arch) for f in fingerprints],
        occurrences=[_occurrence_view(o) for o in repo.occurrences_of(incident.id, occurrences)],
        fixes=fixes,
        similar=similar_incidents(repo, incident.id, fingerprints, candidate_limit),
        recommendation=recommendation,
        analysis=repo.latest_analysis(incident.id),
        merges=[MergeView(m.id, m.source_id, m.target_id, m.created_at, m.undone_at,
                          by=(m.source_state or {}).get("by", "person"),
                          ruleset=(m.source_state or {}).get("ruleset"),
                          occurrences=len((m.moved or {}).get("occurrences") or []))
                for m in repo.merges_of(incident.id)],
        breakdown=_breakdown(repo, incident.id),
        edited_at=incident.edited_at,
        status=incident.status, resolved_in=incident.resolved_in,
        resolved_at=incident.resolved_at, regressed_at=incident.regressed_at,
        resolutions=resolution_history(repo.s, incident.id))




def _breakdown(repo: Repository, incident_id: int) -> OccurrenceBreakdown:
    counts = repo.occurrence_breakdown(incident_id)
    return OccurrenceBreakdown(
        engine_versions=[CountView(v, n) for v, n in counts["engine_version"]],
        gpus=[CountView(v, n) for v, n in counts["gpu"]],
        models=[CountView(v, n) for v, n in counts["model"]])


def resolution_history(session: Session, incident_id: int) -> list[ResolutionView]:
    """Resolved, reopened, regressed: the incident's steps, oldest first."""
    rows = session.scalars(select(IncidentResolution)
                           .where(IncidentResolution.incident_id == incident_id)
                           .order_by(IncidentResolution.id)).all()
    return [ResolutionView(r.action, r.created_at, r.version, r.fix_id, r.occurrence_id)
            for r in rows]


def occurrence_log(db: Database, occurrence_id: int) -> str:
    """The stored (redacted) log text of one occurrence."""
    with db.read() as session:
        blob = Repository(session).occurrence_log(occurrence_id)
    if blob is None:
        raise NotFound(f"occurrence {occurrence_id} does not exist")
    return decompress_log(blob).decode("utf-8", "replace")


def health(db: Database) -> Health:
    """Raises the storage error when the database does not answer (the web layer turns
    it into 503)."""
    with db.engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        try:
            revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except Exception:  # not migrated yet: still alive, but say so
            revision = None
    return Health(status="ok" if revision else "unmigrated", database=db.dialect,
                  version=__version__, schema_revision=revision)
