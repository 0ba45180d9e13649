"""How alike two crashes are. (PROVISIONAL STUB: the real scorer is being written; the
signatures and thresholds' names are final.)"""

from __future__ import annotations

from rapidfuzz import fuzz

from kb.core.records import CrashFeatures, MatchScore

KNOWN_THRESHOLD = 85.0
SIMILAR_THRESHOLD = 60.0


def score(query: CrashFeatures, candidate: CrashFeatures) -> MatchScore:
    s = fuzz.ratio(query.message_template, candidate.message_template)
    if query.exception != candidate.exception:
        s *= 0.5
    status = "known" if s >= KNOWN_THRESHOLD else "similar" if s >= SIMILAR_THRESHOLD else "new"
    return MatchScore(score=round(s, 1), status=status, explanation=[f"message {s:.0f}/100"])
