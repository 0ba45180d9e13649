"""How alike two crashes are: rapidfuzz over the normalized message and the frame
sequence, then weighed by context (engine, version distance, architecture, GPU family,
topology, phase). Pure, so the service, the CLI and the evaluation share one policy.

Score 0-100. `known` (>= KNOWN_THRESHOLD): the same incident. `similar` (>=
SIMILAR_THRESHOLD): worth showing beside the answer, never merged automatically."""

from __future__ import annotations

import re

from rapidfuzz import fuzz, utils
from rapidfuzz.distance import Levenshtein

from kb.core.fingerprint import canonical_exception
from kb.core.gpus import gpu_family
from kb.core.records import CrashFeatures, MatchScore

KNOWN_THRESHOLD = 80.0
SIMILAR_THRESHOLD = 55.0

# weights of the crash itself (sum 1) when both sides have frames / when one has none
_WITH_FRAMES = {"exception": 0.25, "message": 0.55, "frames": 0.20}
_WITHOUT_FRAMES = {"exception": 0.30, "message": 0.70}
# multiplicative context penalties (only when both sides state the value)
_ENGINE_DIFFERS = 0.12
_PHASE_DIFFERS = 0.15  # the same error in another phase of the launch is another incident
_ARCH_DIFFERS = 0.03
_GPU_FAMILY_DIFFERS = 0.03
_TOPOLOGY_DIFFERS = 0.02
_VERSION_STEP = 0.01  # per minor version apart, capped
_VERSION_CAP = 0.05

def message_similarity(a: str, b: str) -> float:
    """0-100. Messages are often cut by viewers: a long common prefix counts fully."""
    if not a or not b:
        return 0.0  # an empty message (truncated log) is evidence of nothing
    ratio = fuzz.ratio(a, b)
    shorter = min(len(a), len(b))
    if shorter >= 40:
        ratio = max(ratio, fuzz.partial_ratio(a, b) * 0.97)
    head_a, head_b = _statement(a), _statement(b)
    if min(len(head_a.split()), len(head_b.split())) >= 5:
        # the same error wrapped in more words by another engine or launcher; only the
        # statement counts here, not the advice that follows ("Try increasing ...")
        ratio = max(ratio, fuzz.token_set_ratio(head_a, head_b, processor=utils.default_process) * 0.9)
    return ratio


def _statement(message: str) -> str:
    """The first sentence of a message: what went wrong, before any advice."""
    return re.split(r"(?<=[.!?])\s", message, maxsplit=1)[0]


def exception_similarity(a: str, b: str) -> float:
    if a and canonical_exception(a) == canonical_exception(b):
        return 100.0
    return 0.0


def frame_similarity(a: list[str], b: list[str]) -> float:
    """Edit distance over frame sequences, aligned at the raise (the end)."""
    if not a or not b:
        return 0.0
    functions_a = [f.rsplit(":", 1)[-1] for f in a]
    functions_b = [f.rsplit(":", 1)[-1] for f in b]
    return max(Levenshtein.normalized_similarity(a, b), 0.9 * Levenshtein.normalized_similarity(functions_a, functions_b)) * 100


def _minor(version: str | None) -> tuple[int, int] | None:
    match = re.match(r"v?(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def score(query: CrashFeatures, candidate: CrashFeatures) -> MatchScore:
    explanation: list[str] = []
    exc = exception_similarity(query.exception, candidate.exception)
    msg = message_similarity(query.message_template, candidate.message_template)
    explanation.append("exception type equal" if exc == 100 else f"exception type differs ({query.exception} vs {candidate.exception})")
    explanation.append(f"message {msg:.0f}/100")
    if query.frames and candidate.frames:
        frames = frame_similarity(query.frames, candidate.frames)
        explanation.append(f"frames {frames:.0f}/100")
        weights = _WITH_FRAMES
        core = weights["exception"] * exc + weights["message"] * msg + weights["frames"] * frames
        # frames only ever help: engines move code between versions
        core = max(core, _WITHOUT_FRAMES["exception"] * exc + _WITHOUT_FRAMES["message"] * msg)
    else:
        core = _WITHOUT_FRAMES["exception"] * exc + _WITHOUT_FRAMES["message"] * msg
    if exc == 0 and msg < 90:
        core *= 0.7  # different type and a different text: a different crash

    factor = 1.0
    factor -= _penalty(query.engine, candidate.engine, _ENGINE_DIFFERS, "engine", explanation)
    factor -= _penalty(_known_phase(query.phase), _known_phase(candidate.phase), _PHASE_DIFFERS, "phase", explanation)
    factor -= _penalty(query.model_arch, candidate.model_arch, _ARCH_DIFFERS, "model architecture", explanation)
    factor -= _penalty(gpu_family(query.gpu_name), gpu_family(candidate.gpu_name), _GPU_FAMILY_DIFFERS, "GPU family", explanation)
    topology_q = _topology(query)
    topology_c = _topology(candidate)
    factor -= _penalty(topology_q, topology_c, _TOPOLOGY_DIFFERS, "topology", explanation)
    version_q, version_c = _minor(query.engine_version), _minor(candidate.engine_version)
    if version_q and version_c and query.engine == candidate.engine:
        distance = abs((version_q[0] - version_c[0]) * 100 + version_q[1] - version_c[1])
        cost = min(_VERSION_CAP, distance * _VERSION_STEP)
        factor -= cost
        explanation.append(f"engine version {query.engine_version} vs {candidate.engine_version}"
                           + (" (same minor)" if distance == 0 else f" ({distance} minor apart)"))
    total = round(max(0.0, core * factor), 1)
    status = "known" if total >= KNOWN_THRESHOLD else "similar" if total >= SIMILAR_THRESHOLD else "new"
    return MatchScore(score=total, status=status, explanation=explanation)


def _penalty(a: object, b: object, cost: float, label: str, explanation: list[str]) -> float:
    if a is None or b is None:
        return 0.0
    if a == b:
        explanation.append(f"same {label} ({a})")
        return 0.0
    explanation.append(f"{label} differs ({a} vs {b})")
    return cost


def _known_phase(phase: str | None) -> str | None:
    return None if phase in (None, "unknown") else phase


def _topology(features: CrashFeatures) -> str | None:
    if features.tp is None and features.dp is None and features.pp is None:
        return None
    return f"tp{features.tp or 1}/dp{features.dp or 1}/pp{features.pp or 1}"
