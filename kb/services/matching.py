"""Which stored incident a crash belongs to: the exact fingerprint first, then fuzzy
scoring (kb.core.match) of candidates the repository loads through indexed columns."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from kb.core.match import KNOWN_THRESHOLD, SIMILAR_THRESHOLD, score
from kb.core.records import CrashFeatures, Fingerprint, MatchScore
from kb.db.repositories import IncidentHead, Repository

# The full scorer costs ~75 us a pair; past this many candidates, only the ones whose
# message is closest (one C-level rapidfuzz pass) get the full score. The message carries
# most of the score's weight, so a candidate far behind on it cannot win anyway.
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


def route_key(fingerprint: Fingerprint, features: CrashFeatures) -> str:
    """The exact-match key: the versioned fingerprint plus engine and phase. The same
    exception text in another engine or phase (an OOM while profiling vs in training)
    has other fixes, so it may be another incident; scoring still finds it as similar."""
    raw = "|".join((fingerprint.version, fingerprint.hash, features.engine or "",
                    features.phase or ""))
    return hashlib.sha256(raw.encode()).hexdigest()[:40]


def _tier(value: float) -> str:
    if value >= KNOWN_THRESHOLD:
        return "known"
    return "similar" if value >= SIMILAR_THRESHOLD else "new"


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
    """`identifying=False` (the analysis found no cause: kb.core Analysis.verdict is not
    "found"): nothing to match on, so never known, never similar."""
    if not identifying:
        return MatchOutcome("new", None, 0.0, ["the log does not show the crash's cause: nothing to match on"])
    exact = repo.head_by_route(route_key(fingerprint, features))
    if exact is not None:
        return exact_match(exact, fingerprint)
    if not features.exception and not features.message_template:
        # Nothing to compare: two logs without an error are not the same crash.
        return MatchOutcome("new", None, 0.0, ["no error found in the log to match on"])
    best: dict[int, MatchScore] = {}
    candidates = repo.candidates(features, candidate_limit)
    if len(candidates) > FULL_SCORE_LIMIT:
        closest = process.extract(features.message_template,
                                  [c.features.message_template for c in candidates],
                                  scorer=fuzz.ratio, limit=FULL_SCORE_LIMIT)
        candidates = [candidates[index] for _, _, index in closest]
    for candidate in candidates:
        result = score(features, candidate.features)
        previous = best.get(candidate.incident_id)
        if previous is None or result.score > previous.score:
            best[candidate.incident_id] = result
    ranked = sorted(best.items(), key=lambda item: (-item[1].score, item[0]))
    if not ranked:
        return MatchOutcome("new", None, 0.0, ["no stored crash shares the exception type, "
                                               "message or engine and phase"])
    top_id, top = ranked[0]
    status = _tier(top.score)
    if status == "new":
        return MatchOutcome("new", None, top.score,
                            [f"closest: incident #{top_id} at {top.score:.1f}", *top.explanation],
                            ranked=ranked)
    return MatchOutcome(status, top_id, top.score, list(top.explanation), ranked=ranked)
