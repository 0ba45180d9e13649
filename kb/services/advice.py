"""Fixes and the patch-or-switch recommendation for an incident, in a given context.
Gathers the evidence from storage and hands it to the pure kb.core.recommend."""

from __future__ import annotations

from collections import defaultdict

from kb.core.recommend import (
    Advice,
    ChainLink,
    FixEvidence,
    IncidentEvidence,
    Where,
    rank_fixes,
    recommend,
)
from kb.core.gpus import gpu_family
from kb.core.records import CrashFeatures
from kb.db.models import Fix, Incident
from kb.db.repositories import IncidentHead, Repository
from kb.services.views import FixView, RecommendationView


def _norm_version(version: str | None) -> str | None:
    return version.strip().lower().lstrip("v") if version else None


def where_at(engine: str | None, engine_version: str | None, model_arch: str | None,
             gpu_name: str | None) -> Where:
    """The context a crash happened in, as fix evidence and recommendations compare it."""
    return Where(engine=engine, engine_version=_norm_version(engine_version),
                 model_arch=model_arch, gpu_family=gpu_family(gpu_name))


def where_of(features: CrashFeatures | None) -> Where:
    if features is None:
        return Where()
    return where_at(features.engine, features.engine_version, features.model_arch,
                    features.gpu_name)


def fix_evidence(repo: Repository, fixes: list[Fix], where: Where) -> list[FixEvidence]:
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for fix_id, worked, version, arch, n in repo.outcome_counts(f.id for f in fixes):
        row = counts[fix_id]
        row[0 if worked else 1] += n
        here = (where.engine_version is not None and where.model_arch is not None
                and _norm_version(version) == where.engine_version and arch == where.model_arch)
        if here:
            row[2 if worked else 3] += n
    out = []
    for fix in fixes:
        worked, failed, worked_here, failed_here = counts[fix.id]
        out.append(FixEvidence(
            id=fix.id, title=fix.title, kind=fix.kind, change=dict(fix.change or {}),
            applies_to=dict(fix.applies_to or {}), worked=fix.curated_worked + worked,
            failed=fix.curated_failed + failed, worked_here=worked_here, failed_here=failed_here))
    return out


def fix_view(fix: Fix, evidence: FixEvidence) -> FixView:
    return FixView(id=fix.id, incident_id=fix.incident_id, title=fix.title, kind=fix.kind,
                   description=fix.description, change=dict(fix.change or {}),
                   applies_to=dict(fix.applies_to or {}), worked=evidence.worked,
                   failed=evidence.failed, worked_here=evidence.worked_here,
                   failed_here=evidence.failed_here, seeded=fix.seeded,
                   edited_at=fix.edited_at, upstream_worked=fix.curated_worked,
                   upstream_failed=fix.curated_failed,
                   team_worked=evidence.worked - fix.curated_worked,
                   team_failed=evidence.failed - fix.curated_failed)


def advise(repo: Repository, incident: Incident | IncidentHead | None, where: Where,
           status: str) -> tuple[list[FixView], RecommendationView]:
    """Ranked fixes of `incident` and the recommendation for a crash in `where`."""
    if incident is None:
        advice = recommend(None, where, "new")
        return [], RecommendationView(advice.path, advice.fix_id, advice.reason)
    # A head read with the incident says when there is nothing to load.
    known_none = isinstance(incident, IncidentHead) and not incident.fix_count
    fixes = [] if known_none else repo.fixes_of([incident.id])
    evidence = fix_evidence(repo, fixes, where)
    followers = repo.chain(incident.id, incident.next_incident_id)
    chain = [ChainLink(i.id, i.title, i.engine_limitation) for i in followers]
    switches = [f for f in repo.fixes_of(i.id for i in followers) if f.kind == "switch_engine"]
    # the last incident of the chain first: that is where patching ends up
    order = {i.id: n for n, i in enumerate(reversed(followers))}
    switches.sort(key=lambda f: (order.get(f.incident_id, 99), f.id))
    advice: Advice = recommend(IncidentEvidence(
        id=incident.id, title=incident.title, engine=incident.engine,
        engine_limitation=incident.engine_limitation, fixes=evidence, chain=chain,
        chain_switches=fix_evidence(repo, switches, where)), where, status)
    by_id = {f.id: f for f in fixes}
    views = [fix_view(by_id[e.id], e) for e in rank_fixes(evidence, where)]
    return views, RecommendationView(advice.path, advice.fix_id, advice.reason, advice.engine,
                                     advice.engine_version)


def refresh_recommended_path(repo: Repository, incident: Incident) -> None:
    """Keep the context-free path the incident list filters on current."""
    _, recommendation = advise(repo, incident, Where(engine=incident.engine), "known")
    if incident.recommended_path != recommendation.path:
        incident.recommended_path = recommendation.path
