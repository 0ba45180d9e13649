"""Patch or switch engines: the advice the service gives for a matched crash.

Pure: it reads the evidence the service gathered (the incident's fixes with their
outcome counts, whether the incident is an engine limitation, the chain of crashes known
to follow once it is fixed) and returns a path, the fix to apply and a reason that names
the evidence. Rules, in order:

1. nothing matched, or the incident has no fix and no limitation -> investigate
2. an in-engine fix (config / patch / upgrade / downgrade / workaround) reported working
   in this very context (same engine version and model arch) -> patch, whatever else holds
3. the incident is an engine limitation -> switch_engine
4. the chain of follow-on crashes after fixing is long (>= LONG_CHAIN incidents) or ends
   in an engine limitation -> switch_engine (the EAGLE-3 on Kimi-K2.5 story: every patch
   uncovered the next crash, and the last one has no in-engine fix)
5. every in-engine fix that applies here was reported failing more often than working
   -> switch_engine
6. an in-engine fix that applies here and has not failed -> patch (best ranked)
7. only switch_engine fixes known -> switch_engine
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kb.core import lazyre
from kb.core.engines import compatible


IN_ENGINE_KINDS = ("config", "patch", "upgrade", "downgrade", "workaround")
FIX_KINDS = (*IN_ENGINE_KINDS, "switch_engine")
PATHS = ("patch", "switch_engine", "investigate")

# How many follow-on crashes after fixing make patching a losing game.
LONG_CHAIN = 3

@dataclass(frozen=True, slots=True)
class Where:
    """The context of the crash being advised on."""

    engine: str | None = None
    engine_version: str | None = None
    model_arch: str | None = None
    gpu_family: str | None = None


@dataclass(slots=True)
class FixEvidence:
    """A fix and what is known about it. `worked`/`failed` count every report (curated
    counts plus user outcomes); `*_here` only outcomes from the same engine version and
    model architecture as the crash being advised."""

    id: int
    title: str
    kind: str
    change: dict[str, Any] = field(default_factory=dict)
    applies_to: dict[str, Any] = field(default_factory=dict)
    worked: int = 0
    failed: int = 0
    worked_here: int = 0
    failed_here: int = 0


@dataclass(frozen=True, slots=True)
class ChainLink:
    incident_id: int
    title: str
    engine_limitation: bool = False


@dataclass(slots=True)
class IncidentEvidence:
    id: int
    title: str
    engine: str | None = None
    engine_limitation: bool = False
    fixes: list[FixEvidence] = field(default_factory=list)
    chain: list[ChainLink] = field(default_factory=list)  # follow-on crashes, in order
    # switch_engine fixes of the incidents in the chain: where to go when the chain is
    # the reason to switch and this incident names no engine itself.
    chain_switches: list[FixEvidence] = field(default_factory=list)


@dataclass(slots=True)
class Advice:
    path: str  # patch | switch_engine | investigate
    fix_id: int | None
    reason: str
    engine: str | None = None  # switch_engine: the engine to move to
    engine_version: str | None = None


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:4])


def version_in(version: str | None, spec: str | None) -> bool | None:
    """Whether an engine version satisfies a PEP 440 specifier set (">=0.10.2,<0.13").
    None when either is unknown or unparseable."""
    if not version or not spec:
        return None
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging ships with pip
        return None
    try:
        match = re.match(r"\d+(?:\.\d+)*", version.strip().lstrip("v"))
        if not match:
            return None
        return SpecifierSet(spec).contains(Version(match.group(0)), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def applies(applies_to: dict[str, Any], where: Where) -> bool | None:
    """Whether a fix's `applies_to` covers this context: False when something known
    contradicts it, True when everything it names is confirmed, None when unknown."""
    verdicts: list[bool | None] = []
    spec = applies_to.get("engine_versions")
    if spec:
        verdicts.append(version_in(where.engine_version, spec))
    archs = applies_to.get("model_archs") or []
    if archs:
        verdicts.append(None if not where.model_arch else where.model_arch in archs)
    families = applies_to.get("gpu_families") or []
    if families:
        verdicts.append(None if not where.gpu_family else where.gpu_family in families)
    if any(v is False for v in verdicts):
        return False
    if verdicts and all(v is True for v in verdicts):
        return True
    return None if verdicts else True


def _rank_key(fix: FixEvidence, where: Where) -> tuple[float, ...]:
    fits = applies(fix.applies_to, where)
    return (
        fix.worked_here - fix.failed_here,  # proven in this very context first
        0 if fits is False else 1,
        fix.worked - fix.failed,
        1 if fits is True else 0,
        1 if fix.kind in IN_ENGINE_KINDS else 0,
        -fix.id,
    )


def rank_fixes(fixes: Sequence[FixEvidence], where: Where) -> list[FixEvidence]:
    """Best first: a fix that worked on the same engine version and architecture outranks
    one that worked elsewhere; one whose applies_to excludes this context sinks."""
    return sorted(fixes, key=lambda f: _rank_key(f, where), reverse=True)


def _switch_target(fixes: Sequence[FixEvidence]) -> tuple[FixEvidence | None, str | None, str | None]:
    for fix in fixes:
        if fix.kind == "switch_engine" and fix.failed <= fix.worked:
            return fix, fix.change.get("engine"), fix.change.get("engine_version")
    return None, None, None


def _switch_advice(fixes: Sequence[FixEvidence], because: str,
                   fallback: Sequence[FixEvidence] = ()) -> Advice:
    fix, engine, version = _switch_target(fixes)
    if fix is None:
        fix, engine, version = _switch_target(fallback)
    if engine:
        target = f"{engine} {version}" if version else engine
        reason = f"{because}; switch to {target} ('{fix.title}'"
        reason += f", worked {fix.worked}x)" if fix.worked else ")"
    else:
        reason = f"{because}; no in-engine fix is known to work, try another engine"
    return Advice("switch_engine", fix.id if fix else None, reason, engine, version)


SUBSTRATES = frozenset({"pytorch", "other"})  # what every engine runs on: its incidents apply to all
_REQUIREMENT = lazyre.compile(r"^[A-Za-z][\w.-]*\s*(?:[<>=!~]=?|===?)")  # "transformers>=4.45.2"


def _other_engine(incident_engine: str | None, crash_engine: str | None) -> bool:
    """Whether a crash of `crash_engine` is advised from another engine's incident: not
    when the incident is a substrate's, nor when one engine runs on the other (a
    DeepSpeed incident for a crash the analyzer calls pytorch, a Ray incident for a vLLM
    crash: kb.core.engines.compatible)."""
    if not incident_engine or not crash_engine:
        return False
    return not compatible(incident_engine, crash_engine) and incident_engine.lower() not in SUBSTRATES


def _engine_agnostic(fix: FixEvidence) -> bool:
    """A fix that pins a dependency (a pip requirement) holds beneath any engine; flags,
    diffs and engine versions are one engine's."""
    version = str(fix.change.get("version") or "")
    return fix.kind in ("upgrade", "downgrade") and bool(_REQUIREMENT.match(version)) and not fix.change.get("flags")


def recommend(incident: IncidentEvidence | None, where: Where, match_status: str = "known") -> Advice:
    """The path to take for a crash that matched `incident` (None: nothing matched)."""
    if incident is None or match_status == "new":
        return Advice("investigate", None, "no stored incident matches this crash; nothing is known yet")
    prefix = "" if match_status == "known" else f"similar incident #{incident.id}: "
    fixes = incident.fixes
    if _other_engine(incident.engine, where.engine):
        # Another engine's flags, patches and versions are never advised here; what holds
        # beneath every engine (a dependency pin) still does.
        fixes = [f for f in fixes if _engine_agnostic(f)]
        if not fixes:
            return Advice("investigate", None, f"{prefix}an incident of {incident.engine}; its fixes "
                          f"are {incident.engine}'s and do not apply to this {where.engine} crash")
    ranked = rank_fixes(fixes, where)
    in_engine = [f for f in ranked if f.kind in IN_ENGINE_KINDS]
    proven_here = [f for f in in_engine if f.worked_here > f.failed_here]
    if proven_here:
        fix = proven_here[0]
        return Advice("patch", fix.id, f"{prefix}'{fix.title}' ({fix.kind}) worked {fix.worked_here}x "
                      f"on this engine version and model architecture")
    if incident.engine_limitation:
        return _switch_advice(ranked, f"{prefix}'{incident.title}' is an engine limitation "
                              f"with no in-engine fix known to work here")
    chain = incident.chain
    if chain and (len(chain) >= LONG_CHAIN or chain[-1].engine_limitation):
        steps = " -> ".join(f"#{link.incident_id} {link.title}" for link in chain)
        why = (f"{len(chain)} more known crash(es) follow once this is fixed"
               if len(chain) >= LONG_CHAIN else "fixing this leads to an engine limitation")
        return _switch_advice(ranked, f"{prefix}{why}: {steps}", incident.chain_switches)
    candidates = [f for f in in_engine if applies(f.applies_to, where) is not False]
    if candidates and all(f.failed > f.worked for f in candidates):
        failed = ", ".join(f"'{f.title}' failed {f.failed}x" for f in candidates[:3])
        return _switch_advice(ranked, f"{prefix}in-engine fixes were reported failing ({failed})")
    for fix in candidates:
        if fix.failed <= fix.worked:
            evidence = (f"worked {fix.worked}x" + (f", failed {fix.failed}x" if fix.failed else "")
                        if fix.worked else "no outcome reported yet")
            fits = applies(fix.applies_to, where)
            scope = " and applies to this context" if fits is True and fix.applies_to else ""
            return Advice("patch", fix.id, f"{prefix}'{fix.title}' ({fix.kind}) {evidence}{scope}")
    if any(f.kind == "switch_engine" for f in ranked):
        return _switch_advice(ranked, f"{prefix}only an engine switch is known for this crash")
    if in_engine:
        return Advice("investigate", None, f"{prefix}the known fixes do not apply to this context "
                      f"({', '.join(repr(f.title) for f in in_engine[:3])})")
    return Advice("investigate", None, f"{prefix}incident #{incident.id} is known but has no fix yet")
