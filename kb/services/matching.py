"""Which stored incident a crash belongs to, in one path for uploads, /analyze, detail
pages and seeding: the exact route first, then candidates (recall keys of kb.core.recall,
indexed lookups) -> rank (kb.core.match with the knowledge base's term weights) -> tier.

Identity policy:
- The exact route is the v4 fingerprint (the error alone) plus the engine: the same
  error from another engine never lands on an incident by itself.
- A log that shows no cause (kb.core Analysis.verdict is not "found") is never matched.
- A weak identity (a crash signal without its crash site, Fingerprint.weak) is never
  routed exactly nor "known": at best "similar", the closest incidents shown.
- A fuzzy "known" routes its fingerprint to the incident for good only at
  ALIAS_THRESHOLD or above, so one borderline match does not keep misrouting later
  uploads; below it, each later upload is scored again."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from kb.core.match import ALIAS_THRESHOLD, SIMILAR_THRESHOLD, phase_decides, score
from kb.core.recall import recall_keys, terms
from kb.core.records import CrashFeatures, Fingerprint, MatchScore
from kb.db.models import IncidentFingerprint
from kb.db.repositories import Candidate, IncidentHead, Repository
from kb.services.views import SimilarView

# The full scorer costs ~75 us a pair; past this many candidates, only the ones whose
# message is closest get the full score.
FULL_SCORE_LIMIT = 32


@dataclass(slots=True)
class MatchOutcome:
    status: str  # known | similar | new
    incident_id: int | None  # known: the incident; similar: the closest one; new: None
    score: float
    explanation: list[str]
    exact: bool = False
    head: IncidentHead | None = None  # the incident of an exact match, as its lookup read it
    # Best score per other incident, best first (for the "similar" list).
    ranked: list[tuple[int, MatchScore]] = field(default_factory=list)

    @property
    def adds_alias(self) -> bool:
        """Whether this match routes the fingerprint to its incident from now on."""
        return self.status == "known" and not self.exact and self.score >= ALIAS_THRESHOLD


def route_key(fingerprint: Fingerprint, features: CrashFeatures) -> str:
    """The exact-match key: the versioned fingerprint plus the engine, and for memory
    running out the phase too (kb.core.match.phase_decides: the scorer keeps such crashes
    of two phases apart, so the exact route must not join them)."""
    parts = [fingerprint.version, fingerprint.hash, features.engine or ""]
    if phase_decides(features):
        parts.append(features.phase or "unknown")
    raw = "|".join(parts)
    return hashlib.sha256(raw.encode()).hexdigest()[:40]


def exact_match(head: IncidentHead, fingerprint: Fingerprint) -> MatchOutcome:
    """The verdict for a crash whose exact route leads to `head`."""
    return MatchOutcome("known", head.id, 100.0,
                        [f"fingerprint identical ({fingerprint.hash[:12]}, v{fingerprint.version})"],
                        exact=True, head=head)


def unique_route() -> str:
    """A route no other upload shares: for a log that identifies no crash (no error
    found, or only wrappers and traces of one), which must never group with another."""
    return "unidentified:" + uuid.uuid4().hex


def find_match(repo: Repository, fingerprint: Fingerprint, features: CrashFeatures,
               candidate_limit: int, identifying: bool = True) -> MatchOutcome:
    """`identifying=False` (the analysis found no cause): nothing to match on, so never
    known, never similar."""
    if not identifying:
        return MatchOutcome("new", None, 0.0, ["the log does not show the crash's cause: nothing to match on"])
    exact = None if fingerprint.weak else repo.head_by_route(route_key(fingerprint, features))
    if exact is not None:
        return exact_match(exact, fingerprint)
    if not features.exception and not features.message_template:
        return MatchOutcome("new", None, 0.0, ["no error found in the log to match on"])
    ranked = rank(repo, features, candidate_limit)
    if not ranked:
        return MatchOutcome("new", None, 0.0, ["no stored crash shares the exception type, "
                                               "message or engine and phase"])
    top_id, top = ranked[0]
    if fingerprint.weak and top.status == "known":
        return MatchOutcome("similar", top_id, top.score,
                            ["the log shows the signal, not where the process crashed: at most similar",
                             *top.explanation], ranked=ranked)
    if top.status == "new":
        return MatchOutcome("new", None, top.score,
                            [f"closest: incident #{top_id} at {top.score:.1f}", *top.explanation],
                            ranked=ranked)
    return MatchOutcome(top.status, top_id, top.score, list(top.explanation), ranked=ranked)


def rank(repo: Repository, features: CrashFeatures, candidate_limit: int,
         exclude: int | None = None) -> list[tuple[int, MatchScore]]:
    """Best score per stored incident, best first (ties: the older incident)."""
    candidates = [c for c in repo.candidates(recall_keys(features), candidate_limit)
                  if c.incident_id != exclude]
    if not candidates:
        return []
    if len(candidates) > FULL_SCORE_LIMIT:
        # WRatio weighs a text found inside a longer one (a message cut by a viewer) as
        # close, where a plain ratio would drop it; one C-level pass over all candidates
        closest = process.extract(features.message_template,
                                  [c.features.message_template for c in candidates],
                                  scorer=fuzz.WRatio, limit=FULL_SCORE_LIMIT)
        candidates = [candidates[index] for _, _, index in closest]
    weights = repo.term_weights(_terms_of(features, candidates))
    best: dict[int, MatchScore] = {}
    for candidate in candidates:
        result = score(features, candidate.features, weights)
        previous = best.get(candidate.incident_id)
        if previous is None or result.score > previous.score:
            best[candidate.incident_id] = result
    return sorted(best.items(), key=lambda item: (-item[1].score, item[0]))


def _terms_of(features: CrashFeatures, candidates: Iterable[Candidate]) -> set[str]:
    wanted = set(terms(features.message_template))
    for candidate in candidates:
        wanted |= terms(candidate.features.message_template)
    return wanted


def features_of(row: IncidentFingerprint) -> CrashFeatures:
    return CrashFeatures(
        exception=row.exception, message_template=row.message_template, frames=list(row.frames or []),
        engine=row.engine, engine_version=row.engine_version, model_arch=row.model_arch,
        gpu_name=row.gpu_name, gpu_count=row.gpu_count, tp=row.tp, dp=row.dp, pp=row.pp, ep=row.ep,
        phase=row.phase)


def similar_incidents(repo: Repository, incident_id: int, fingerprints: list[IncidentFingerprint],
                      candidate_limit: int, shown: int = 5) -> list[SimilarView]:
    """Other incidents like this one (its first three fingerprints), by the same ranking."""
    best: dict[int, float] = {}
    for row in fingerprints[:3]:
        for other_id, result in rank(repo, features_of(row), candidate_limit, exclude=incident_id):
            if result.score >= SIMILAR_THRESHOLD and result.score > best.get(other_id, -1):
                best[other_id] = result.score
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))[:shown]
    titles = repo.titles(i for i, _ in ranked)
    seeded = repo.seeded_among(titles)
    return [SimilarView(i, s, titles[i][0], i in seeded) for i, s in ranked if i in titles]

