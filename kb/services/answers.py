"""The parts of an upload's answer: the analysis as a dict, the incident's reference, a
new incident's title, the similar incidents shown."""

from __future__ import annotations

from typing import Any

import msgspec

from kb.core.match import SIMILAR_THRESHOLD
from kb.core.records import LOGGED_ERROR, Analysis
from kb.core.redact import redact_field
from kb.db.models import Incident
from kb.db.repositories import IncidentHead, Repository
from kb.services.matching import MatchOutcome
from kb.services.views import IncidentRef, SimilarView

SIMILAR_SHOWN = 5


def analysis_dict(analysis: Analysis) -> dict[str, Any]:
    """Analysis.to_dict, by msgspec's C converter: 20x faster than dataclasses.asdict
    (0.3 ms an upload). The core keeps asdict: msgspec costs the CLI 20 ms to import,
    the service has it loaded already (Litestar's serializer)."""
    return msgspec.to_builtins(analysis)  # type: ignore[no-any-return]


def incident_ref(incident: Incident | IncidentHead) -> IncidentRef:
    return IncidentRef(id=incident.id, title=incident.title,
                       occurrences=incident.occurrence_count,
                       first_seen=incident.first_seen, last_seen=incident.last_seen,
                       slug=incident.slug)


TITLE_CHARS = 160


def short_title(text: str, size: int = TITLE_CHARS) -> str:
    """`text` on one line, cut at a word boundary with an ellipsis when longer than `size`."""
    text = " ".join(text.split())
    if len(text) <= size:
        return text
    cut = text[:size - 1]
    if " " in cut[size // 2:]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.") + "…"


def title_for(analysis: Analysis) -> str:
    """The title of a new incident, from its root cause (redacted already, and again
    here: a title is shown everywhere). A log whose cause was not captured says so
    first, with the wrapper's own words; an ERROR line without an exception is its
    message, not "logged error: ..."; long titles end at a word, with an ellipsis."""
    event = analysis.root_cause or next(iter(analysis.symptoms), None)
    if not analysis.identifies and event is not None:
        said = event.message if event.exception == LOGGED_ERROR else event.headline
        return short_title(redact_field(f"Cause not captured: {said}"))
    signature = (analysis.fingerprint.signature or "").split(" | ")[0].strip()
    if signature.startswith(f"{LOGGED_ERROR}: "):
        signature = signature[len(LOGGED_ERROR) + 2:]
    if signature and signature != ":":
        return short_title(redact_field(signature))
    if analysis.root_cause is not None:
        return short_title(redact_field(analysis.root_cause.headline))
    return "Crash without a recognizable error"


def _similar(repo: Repository, match: MatchOutcome, exclude: int | None) -> list[SimilarView]:
    picked = [(i, s) for i, s in match.ranked if i != exclude and s.score >= SIMILAR_THRESHOLD]
    picked = picked[:SIMILAR_SHOWN]
    titles = repo.titles(i for i, _ in picked)
    return [SimilarView(i, s.score, titles.get(i, ("?", False))[0]) for i, s in picked]
