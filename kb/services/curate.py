"""People curating the knowledge base: edit an incident, add or edit a fix, report
whether a fix worked, merge duplicates. Each is one transaction; each keeps the incident's
context-free recommendation path current for the list filter."""

from __future__ import annotations

from kb.core import fixschema
from kb.core.recommend import Where
from kb.db.models import Fix, FixOutcome, Incident, IncidentMerge, utcnow
from kb.db.repositories import Repository
from kb.db.session import Database
from kb.services.advice import fix_evidence, fix_view, refresh_recommended_path
from kb.services.errors import Conflict, InvalidInput, NotFound
from kb.services.queries import detail_in
from kb.services.views import (
    FixPatch,
    FixView,
    IncidentDetail,
    IncidentPatch,
    MergeRequest,
    NewFix,
    NewOutcome,
    OutcomeView,
)

MAX_TAGS = 30


def _clean_tags(tags: list[str]) -> list[str]:
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput("tags must be strings")
        tag = tag.strip().lower()
        if tag and tag not in out:
            out.append(tag[:60])
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"at most {MAX_TAGS} tags")
    return out


def patch_incident(db: Database, incident_id: int, patch: IncidentPatch) -> IncidentDetail:
    with db.write() as session:
        repo = Repository(session)
        incident = repo.incident(incident_id, lock=True)
        if incident is None:
            raise NotFound(f"incident {incident_id} does not exist")
        if patch.title is not None:
            title = patch.title.strip()
            if not title:
                raise InvalidInput("title must not be empty")
            incident.title = title[:500]
        if patch.notes is not None:
            incident.notes = patch.notes or None
        if patch.tags is not None:
            incident.tags = _clean_tags(patch.tags)
            repo.replace_facets(incident.id, "tag", incident.tags)
        curated = apply_curated_fields(repo, incident, patch)
        incident.updated_at = incident.edited_at = utcnow()
        session.flush()
        if curated:  # an engine limitation or a chain changes the advice
            refresh_recommended_path(repo, incident)
        return detail_in(repo, incident.id)


def _curated_check(check: object, value: str, field: str) -> None:
    try:
        check(value, field)  # type: ignore[operator]
    except fixschema.RecordError as exc:
        raise InvalidInput(str(exc), field=exc.field) from None


def apply_curated_fields(repo: Repository, incident: Incident, patch: IncidentPatch) -> bool:
    """The seed schema's curated fields of `patch` onto `incident`, checked as `kb seed`
    checks them (PEP 440 ranges and versions, a `next` that exists and makes no cycle);
    a refusal names the field. True when one was given."""
    given = False
    for name, check in (("affected_versions", fixschema.check_specifier),
                        ("fixed_in", fixschema.check_version)):
        value = getattr(patch, name)
        if value is None:
            continue
        given = True
        value = value.strip()
        if value:
            _curated_check(check, value, name)
        setattr(incident, name, value[:200 if name == "affected_versions" else 40] or None)
    if patch.engine_limitation is not None:
        given = True
        incident.engine_limitation = bool(patch.engine_limitation)
    if patch.next is not None:
        given = True
        incident.next_incident_id = _next_id(repo, incident, patch.next)
    return given


def _next_id(repo: Repository, incident: Incident, ref: int | str) -> int | None:
    """The incident `ref` (an id or a slug; 0 or "" for none) names as the crash that
    follows `incident`, refused when it does not exist or would close a loop."""
    if isinstance(ref, str):
        ref = ref.strip().lstrip("#")
        if not ref:
            return None
        target = repo.incident(int(ref)) if ref.isdigit() and len(ref) < 19 else repo.incident_by_slug(ref)
    elif ref == 0:
        return None
    else:
        target = repo.incident(ref) if 0 < ref < 2**63 else None
    if target is None:
        raise InvalidInput(f"next: {ref!r} is not an incident (give its number or slug)", field="next")
    target_id = repo.live_incident_id(target.id)
    live_target = repo.incident(target_id)
    after = repo.chain(target_id, live_target.next_incident_id) if live_target else []
    if target_id == incident.id or any(i.id == incident.id for i in after):
        raise InvalidInput(f"next: #{target_id} leads back to #{incident.id}; a chain cannot loop",
                           field="next")
    return target_id


def _check_fix(title: str | None, kind: str | None, change: object, applies_to: object) -> None:
    """A fix as it will be stored follows its kind's schema (kb.core.fixschema); a
    refusal names the field. For an edit, call it with the fields as they will be."""
    if title is not None and not title.strip():
        raise InvalidInput("title: must not be empty", field="title")
    try:
        fixschema.check_fix(kind, change, applies_to)
    except fixschema.RecordError as exc:
        raise InvalidInput(str(exc), field=exc.field) from None


def add_fix(db: Database, incident_id: int, new: NewFix) -> FixView:
    _check_fix(new.title or "", new.kind, new.change, new.applies_to)
    with db.write() as session:
        repo = Repository(session)
        incident = repo.incident(incident_id)
        if incident is None:
            raise NotFound(f"incident {incident_id} does not exist")
        if incident.merged_into_id is not None:
            incident = repo.incident(repo.live_incident_id(incident.id))
            assert incident is not None
        now = utcnow()
        fix = Fix(incident_id=incident.id, title=new.title.strip()[:500], kind=new.kind,
                  description=new.description, change=new.change, applies_to=new.applies_to,
                  seeded=False, author=new.author, curated_worked=0, curated_failed=0,
                  created_at=now, updated_at=now)
        session.add(fix)
        session.flush()
        refresh_recommended_path(repo, incident)
        return fix_view(fix, fix_evidence(repo, [fix], Where())[0])


def edit_fix(db: Database, fix_id: int, patch: FixPatch) -> FixView:
    """Change a fix's title, kind, description, change or applies_to (the fields given).
    Seeded fixes too: the edit is stamped (edited_at), and re-seeding keeps it."""
    with db.write() as session:
        repo = Repository(session)
        fix = repo.fix(fix_id)
        if fix is None:
            raise NotFound(f"fix {fix_id} does not exist")
        # the record as the edit leaves it, checked before anything changes
        _check_fix(patch.title, patch.kind or fix.kind,
                   fix.change if patch.change is None else patch.change,
                   fix.applies_to if patch.applies_to is None else patch.applies_to)
        if patch.title is not None:
            fix.title = patch.title.strip()[:500]
        if patch.kind is not None:
            fix.kind = patch.kind
        if patch.description is not None:
            fix.description = patch.description.strip() or None
        if patch.change is not None:
            fix.change = patch.change
        if patch.applies_to is not None:
            fix.applies_to = patch.applies_to
        now = utcnow()
        fix.edited_at = fix.updated_at = now
        session.flush()
        incident = repo.incident(fix.incident_id)
        if incident is not None:  # the kind decides patch vs switch_engine
            refresh_recommended_path(repo, incident)
        return fix_view(fix, fix_evidence(repo, [fix], Where())[0])


def add_outcome(db: Database, fix_id: int, new: NewOutcome) -> OutcomeView:
    with db.write() as session:
        repo = Repository(session)
        fix = repo.fix(fix_id)
        if fix is None:
            raise NotFound(f"fix {fix_id} does not exist")
        outcome = FixOutcome(fix_id=fix.id, worked=bool(new.worked), note=new.note,
                             engine=new.engine, engine_version=new.engine_version,
                             model_arch=new.model_arch, gpu=new.gpu, reporter=new.reporter,
                             created_at=utcnow())
        session.add(outcome)
        session.flush()
        incident = repo.incident(fix.incident_id)
        if incident is not None:
            refresh_recommended_path(repo, incident)
        where = Where(engine_version=new.engine_version, model_arch=new.model_arch)
        return OutcomeView(id=outcome.id, fix_id=fix.id, worked=outcome.worked, note=outcome.note,
                           engine=outcome.engine, engine_version=outcome.engine_version,
                           model_arch=outcome.model_arch, gpu=outcome.gpu,
                           reporter=outcome.reporter, created_at=outcome.created_at,
                           fix=fix_view(fix, fix_evidence(repo, [fix], where)[0]))


def merge_incident(db: Database, incident_id: int, request: MergeRequest) -> IncidentDetail:
    """Fold a duplicate into another incident: its occurrences, fixes and fingerprints
    move, so later uploads of the duplicate's fingerprint land on the target."""
    with db.write() as session:
        repo = Repository(session)
        source = repo.incident(incident_id, lock=True)
        if source is None:
            raise NotFound(f"incident {incident_id} does not exist")
        target = repo.incident(request.into)
        if target is None:
            raise NotFound(f"incident {request.into} does not exist")
        target_id = repo.live_incident_id(target.id)
        if source.merged_into_id is not None:
            raise Conflict(f"incident {incident_id} was already merged into "
                           f"#{repo.live_incident_id(source.id)}")
        if target_id == source.id:
            raise Conflict("an incident cannot be merged into itself")
        target = repo.incident(target_id, lock=True)
        assert target is not None
        merge_rows(repo, source, target)
        session.flush()
        refresh_recommended_path(repo, target)
        return detail_in(repo, target.id)


def merge_rows(repo: Repository, source: Incident, target: Incident) -> None:
    """Move everything of `source` onto `target`, mark `source` merged and record what
    moved, so an unmerge can move it back (no checks)."""
    state = {"next_incident_id": source.next_incident_id, "recommended_path": source.recommended_path}
    moved = repo.move_incident_rows(source.id, target.id)
    repo.s.add(IncidentMerge(source_id=source.id, target_id=target.id, moved=moved,
                             source_state=state, created_at=utcnow()))
    target.occurrence_count += source.occurrence_count
    seen = [d for d in (source.first_seen, target.first_seen) if d]
    target.first_seen = min(seen) if seen else None
    seen = [d for d in (source.last_seen, target.last_seen) if d]
    target.last_seen = max(seen) if seen else None
    if target.next_incident_id is None and source.next_incident_id not in (None, target.id):
        target.next_incident_id = source.next_incident_id
    now = utcnow()
    target.updated_at = now
    source.merged_into_id = target.id
    source.occurrence_count = 0
    source.recommended_path = "investigate"
    source.updated_at = now
    repo.s.flush()


def unmerge_incident(db: Database, incident_id: int) -> IncidentDetail:
    """Undo the recorded merge that folded `incident_id` away: its occurrences, fixes,
    fingerprints and facets come back (from wherever later merges took them), both
    incidents' counts are recomputed, and later uploads of its fingerprints route to it
    again. The merge record is kept, marked undone."""
    with db.write() as session:
        repo = Repository(session)
        source = repo.incident(incident_id, lock=True)
        if source is None:
            raise NotFound(f"incident {incident_id} does not exist")
        if source.merged_into_id is None:
            raise Conflict(f"incident {incident_id} is not merged into another one")
        record = repo.last_merge(source.id)
        if record is None:
            raise Conflict(f"incident {incident_id} was merged before merges were recorded: "
                           "nothing says which rows were its own")
        holder = repo.incident(repo.live_incident_id(source.id), lock=True)
        assert holder is not None
        repo.restore_incident_rows(record.moved, source.id)
        now = utcnow()
        source.merged_into_id = None
        source.next_incident_id = record.source_state.get("next_incident_id")
        for incident in (source, holder):
            incident.occurrence_count, incident.first_seen, incident.last_seen = repo.occurrence_span(incident.id)
            incident.updated_at = now
        record.undone_at = now
        session.flush()
        refresh_recommended_path(repo, source)
        refresh_recommended_path(repo, holder)
        return detail_in(repo, source.id)


__all__ = ["add_fix", "add_outcome", "edit_fix", "merge_incident", "merge_rows",
           "patch_incident", "unmerge_incident"]
