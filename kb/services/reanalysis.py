"""Re-analysis: every stored log analyzed again with the installed rules (detection,
normalization, identity: kb.services.ruleset), and the incidents regrouped the way the
upload path would group those logs today.

`plan` (kb reanalyze --dry-run) says what would change and writes nothing; `apply`
(kb reanalyze) makes the change, one transaction per incident. Both run the same
decision (`decide`) over the incidents in the same order (oldest first), so the dry run
predicts the apply: the plan keeps in memory the routes the incidents before would have
claimed or dropped (as routes, match candidates and term counts), the apply has them in
the database. Exact routes are predicted exactly; a fuzzy match only approximately when
a fingerprint claimed earlier in the run would have been cut by the recall lookups'
limits (the plan adds every claimed one that a lookup would bring).

What decides where an occurrence goes (per incident, its logs grouped by identity, the
group of the oldest log first):
- a log that shows no cause (or a weak one) stays where it is: nothing routes it;
- an occurrence a recorded merge moved (a person's decision, or a seed absorbing an
  uploaded incident) stays where that merge put it, and so does one whose move by an
  earlier re-analysis a person undid (unmerge);
- an identity whose exact route leads to another incident moves there;
- an identity no incident routes yet: an uploaded incident keeps it if it has no
  identity of its own yet (its oldest); otherwise (and always for a seeded incident,
  whose identity is its seed's) the production match (kb.services.matching.find_match)
  decides: "known" to an incident moves there (or stays), anything else becomes a new
  incident, as an upload would. Not for logs stored by the installed rules with the
  same fingerprint: a fuzzy match placed them under these very rules, and the term
  weights' drift since is no reason to move them.
Then the incident routes the identities it keeps, drops the upload routes no stored log
of it produces any more (seed routes are kb seed's), and has its counts, facets and
recommendation recomputed, like every incident it gave occurrences to. An uploaded
incident left without occurrences is folded (a recorded merge, undoable) into the one
that took most of them, with its fixes; a seeded incident is kept with its fixes.
Every move is recorded in incident_merges, marked {"by": "reanalysis"} in source_state,
so a curator sees it on both incidents' pages. A second run changes nothing.

An incident's transaction lasts while its logs are analyzed (milliseconds a log). On
Postgres it locks only the incidents it changes; on SQLite it holds the database's write
lock, so uploads wait for it (up to the busy timeout): run it when uploads are quiet."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from kb.core.analyze import analyze
from kb.core.gpus import gpu_family
from kb.core.recall import RecallKeys, TermWeights, message_key, terms
from kb.core.records import Analysis, CrashFeatures, Fingerprint
from kb.db import logsearch, regrouping
from kb.db.logcodec import decompress_log
from kb.db.models import Incident, IncidentMerge, utcnow
from kb.db.repositories import Candidate, Repository, facet_values
from kb.db.session import Database
from kb.services.advice import refresh_recommended_path
from kb.services.answers import analysis_dict, title_for
from kb.services.ingest import Overrides, with_overrides
from kb.services.matching import find_match, route_key
from kb.services.ruleset import ruleset
from kb.services.upload_form import clip

BY = "reanalysis"  # source_state["by"] of the merge records a re-analysis writes
SEEN_ON = ("model_arch", "gpu", "gpu_family", "engine_version")  # facets occurrences make
UNROUTED = "unidentified:"  # kb.services.matching.unique_route: routes nothing

# What the uploader may have set over the log ("set by the uploader: ..." in the stored
# analysis notes), and the occurrence column that kept the value.
_UPLOADER_FIELDS = {"engine": "engine", "engine_version": "engine_version", "model": "model",
                    "model_arch": "model_arch", "gpu": "gpu_name", "gpu_count": "gpu_count",
                    "tp": "tp", "dp": "dp", "pp": "pp", "ep": "ep"}
_NOTE = "set by the uploader: "


@dataclass(slots=True)
class Reanalyzed:
    """One stored occurrence as the installed rules see it (small: the analysis itself
    is written back or dropped as soon as it is made)."""

    id: int
    created_at: datetime | None
    key: str | None  # its exact route; None: it identifies nothing a route could hold
    fingerprint: Fingerprint
    features: CrashFeatures
    title: str
    pinned: bool  # a recorded merge put it where it is
    settled: bool = False  # stored by the installed rules with this very fingerprint


@dataclass(slots=True)
class Move:
    items: list[Reanalyzed]
    to: int | None  # None: a new incident, made for these
    claims: bool  # their identity routes to `to` from now on


@dataclass(slots=True)
class Decision:
    """What re-analysis does to one incident."""

    incident_id: int
    items: list[Reanalyzed]
    identities: int = 0  # distinct identities among its logs
    moves: list[Move] = field(default_factory=list)
    claims: list[Reanalyzed] = field(default_factory=list)  # identities it routes from now on
    stale: list[str] = field(default_factory=list)  # its upload routes no log of it produces
    pinned: int = 0  # occurrences kept here by a recorded merge though routed elsewhere
    home: Reanalyzed | None = None  # the identity it keeps: its representative fingerprint

    @property
    def stays(self) -> bool:
        moved = sum(len(m.items) for m in self.moves)
        return moved < len(self.items)


@dataclass(slots=True)
class Regrouping:
    """The summary `kb reanalyze` prints: predicted (dry run) or done."""

    applied: bool = False
    occurrences: int = 0
    other_rulesets: int = 0  # stored by rules other than the installed ones (or before 0006)
    changed: int = 0  # its log now gives another fingerprint than the one stored
    unidentified: int = 0  # its log now shows no cause (or a weak one): it stays where it is
    pinned: int = 0  # kept where a recorded merge put it, though its identity routes elsewhere
    moves: list[tuple[int, int, int | None]] = field(default_factory=list)  # occurrence, from, to
    new_incidents: int = 0
    splits: dict[int, int] = field(default_factory=dict)  # incident -> incidents its logs go to
    # incidents holding logs of one identity (they regroup: moves, or folds when emptied)
    merges: list[tuple[int, ...]] = field(default_factory=list)
    folded: list[tuple[int, int | None]] = field(default_factory=list)  # emptied incident, into
    routes_added: int = 0
    routes_dropped: int = 0
    rewritten: int = 0  # occurrences whose stored analysis, fingerprint or ruleset changed
    failures: list[tuple[int, str]] = field(default_factory=list)  # incident, why (untouched)

    def lines(self, shown: int = 10) -> list[str]:
        would = "" if self.applied else "would "

        def where(target: int | None) -> str:
            return f"#{target}" if target is not None and target > 0 else "a new incident"

        out = [f"occurrences re-analyzed: {self.occurrences} "
               f"({self.other_rulesets} stored by other rules than {ruleset()})",
               f"  another fingerprint than stored: {self.changed}",
               f"  no identifying cause any more:   {self.unidentified} (they stay where they are)",
               f"  kept where a recorded merge put them: {self.pinned}",
               f"  {'moved' if self.applied else 'would move'} to another incident:  {len(self.moves)}"]
        out += [f"    occurrence #{o}: incident #{a} -> {where(b)}" for o, a, b in self.moves[:shown]]
        out.append(f"incidents that {would}split: {len(self.splits)}")
        out += [f"    #{i}: its logs {'went' if self.applied else 'would go'} to {n} incidents"
                for i, n in list(self.splits.items())[:shown]]
        out.append(f"incidents holding logs of one identity: {len(self.merges)} group(s)")
        out += ["    " + " + ".join(f"#{i}" for i in group) for group in self.merges[:shown]]
        out.append(f"new incidents: {self.new_incidents}; emptied incidents folded: {len(self.folded)}")
        out += [f"    #{i} into {where(t)}" for i, t in self.folded[:shown]]
        out.append(f"routes added: {self.routes_added}, dropped: {self.routes_dropped}")
        if self.applied:
            out.append(f"occurrences rewritten (analysis, fingerprint, ruleset): {self.rewritten}")
        out.append(f"incidents not re-analyzed (left untouched): {len(self.failures)}")
        out += [f"    #{i}: {why}" for i, why in self.failures[:shown]]
        return out


# ---- re-analysis of one stored log ------------------------------------------------------


def uploader_overrides(row: Any) -> Overrides:
    """What the uploader said over the log, recovered from the stored analysis's note and
    the occurrence's columns: re-analysis keeps a person's word."""
    named: list[str] = []
    for note in (row.analysis or {}).get("notes") or []:
        if isinstance(note, str) and note.startswith(_NOTE):
            named += [n.strip() for n in note[len(_NOTE):].split(",")]
    return Overrides(**{name: getattr(row, column) for name, column in _UPLOADER_FIELDS.items()
                        if name in named and getattr(row, column) is not None})


def reanalyze_row(row: Any) -> tuple[Analysis, CrashFeatures, bytes]:
    """A stored occurrence's log analyzed by the installed rules, the uploader's fields
    put over it (an engine once known is not forgotten when the log does not name it),
    and the log itself."""
    log = decompress_log(row.log_compressed)
    analysis, features = with_overrides(analyze(log), uploader_overrides(row))
    if analysis.context.engine is None and row.engine:
        analysis.context.engine = row.engine
        features = CrashFeatures.from_analysis(analysis)
    return analysis, features, log


def identity_key(analysis: Analysis, features: CrashFeatures) -> str | None:
    """The exact route of an analysis, or None when it may not be routed (no cause, or a
    weak identity: kb.services.matching's policy)."""
    if not analysis.identifies or analysis.fingerprint.weak:
        return None
    return route_key(analysis.fingerprint, features)


def occurrence_values(analysis: Analysis, log: bytes) -> dict[str, Any]:
    """The occurrence's columns the analysis decides (as kb.services.ingest stores them),
    the log search's excerpt too: it is cut around the errors the analysis found."""
    ctx = analysis.context
    analysis_json = analysis_dict(analysis)
    return dict(
        fingerprint_hash=analysis.fingerprint.hash, analysis=analysis_json,
        search_text=logsearch.search_text(log, analysis_json),
        engine=clip(ctx.engine, 40), engine_version=clip(ctx.engine_version, 60),
        model=clip(ctx.model, 300), model_arch=clip(ctx.model_arch, 120),
        gpu_name=clip(ctx.gpu.name, 120), gpu_count=ctx.gpu.count, tp=ctx.parallel.tp,
        dp=ctx.parallel.dp, pp=ctx.parallel.pp, ep=ctx.parallel.ep, phase=clip(analysis.phase, 40),
        ruleset=ruleset())


def _reanalyze(session: Any, incident_id: int, pinned: set[int], seen: set[int],
               report: Regrouping, write: bool) -> list[Reanalyzed]:
    """Every stored occurrence of the incident, re-analyzed; with `write`, the changed
    ones written back at once (the analysis is not kept). An occurrence an earlier
    incident of the run moved here (`seen`) is counted once."""
    items: list[Reanalyzed] = []
    for row in regrouping.stored_occurrences(session, incident_id):
        analysis, features, log = reanalyze_row(row)
        key = identity_key(analysis, features)
        if row.id not in seen:
            report.occurrences += 1
            report.other_rulesets += row.ruleset != ruleset()
            report.changed += analysis.fingerprint.hash != row.fingerprint_hash
            report.unidentified += key is None
        if write:
            values = occurrence_values(analysis, log)
            if any(getattr(row, name) != value for name, value in values.items()):
                regrouping.update_occurrence(session, row.id, values)
                report.rewritten += 1
        settled = row.ruleset == ruleset() and row.fingerprint_hash == analysis.fingerprint.hash
        items.append(Reanalyzed(row.id, row.created_at, key, analysis.fingerprint, features,
                                title_for(analysis), row.id in pinned, settled))
    return items


# ---- the decision -----------------------------------------------------------------------


def decide(repo: Repository, incident_id: int, items: list[Reanalyzed],
           owner_of: Callable[[str], int | None], upload_routes: Iterable[str],
           candidate_limit: int, seeded: bool = False) -> Decision:
    """Where each of the incident's occurrences belongs (see the module's docstring).
    `owner_of(key)`: the live incident the route leads to, None when nothing routes it;
    `upload_routes`: the route keys the incident holds from uploads. A seeded incident
    has an identity of its own (its seed's examples): a log of it no route leads to is
    matched like an upload (it stays when it matches; no route is added below the
    alias threshold)."""
    decision = Decision(incident_id, items)
    groups: dict[str, list[Reanalyzed]] = defaultdict(list)
    for item in sorted(items, key=lambda i: (i.created_at is None, i.created_at or 0, i.id)):
        if item.key is not None:
            groups[item.key].append(item)
    decision.identities = len(groups)
    owners = {key: owner_of(key) for key in groups}
    has_home = seeded or incident_id in owners.values()
    kept: set[str] = set()
    for key, members in groups.items():
        owner, first = owners[key], members[0]
        free = [m for m in members if not m.pinned]
        if owner == incident_id:
            kept.add(key)
            decision.home = decision.home or first
            continue
        if owner is not None:  # another incident routes it: go there, but for merged ones
            decision.pinned += len(members) - len(free)
            if free:
                decision.moves.append(Move(free, owner, claims=False))
            continue
        if len(free) < len(members) or not has_home:  # a person put it here, or the first
            decision.claims.append(first)
            kept.add(key)
            has_home = True
            decision.home = decision.home or first
            continue
        if all(m.settled for m in free):
            continue  # placed by a fuzzy match under these very rules: drift is no reason
        match = find_match(repo, first.fingerprint, first.features, candidate_limit)
        if match.status == "known" and match.incident_id == incident_id:
            if match.adds_alias:
                decision.claims.append(first)
                kept.add(key)
            continue
        if match.status == "known":
            decision.moves.append(Move(free, match.incident_id, claims=match.adds_alias))
        else:
            decision.moves.append(Move(free, None, claims=True))
    decision.stale = sorted(k for k in set(upload_routes)
                            if not k.startswith(UNROUTED) and k not in kept)
    return decision


def _fold_target(decision: Decision, seeded: bool, targets: list[int]) -> int | None:
    """Where an uploaded incident re-analysis empties goes: the incident that took most
    of its occurrences (ties: the first); None when it keeps occurrences, is seeded or
    had none. `targets`: where each move went."""
    if seeded or not decision.items or decision.stays:
        return None
    taken: Counter[int] = Counter()
    for move, target in zip(decision.moves, targets, strict=True):
        taken[target] += len(move.items)
    return max(taken, key=lambda t: (taken[t], -targets.index(t)))


def _tally(report: Regrouping, decision: Decision, holders: dict[str, set[int]],
           targets: list[int]) -> None:
    """The decision in the summary; `targets` is where each move went (or would go)."""
    for item in decision.items:
        if item.key is not None:
            holders[item.key].add(decision.incident_id)
    places = set(targets) | ({decision.incident_id} if decision.stays else set())
    if len(places) > 1:
        report.splits[decision.incident_id] = len(places)
    for move, target in zip(decision.moves, targets, strict=True):
        report.moves += [(item.id, decision.incident_id, target) for item in move.items]
        report.new_incidents += move.to is None
    report.routes_added += len(decision.claims) + sum(m.claims for m in decision.moves)
    report.routes_dropped += len(decision.stale)
    report.pinned += decision.pinned


def _finish(report: Regrouping, holders: dict[str, set[int]]) -> Regrouping:
    report.merges = sorted({tuple(sorted(ids)) for ids in holders.values() if len(ids) > 1})
    return report


def _pinned(session: Any) -> set[int]:
    """Occurrences a person placed: those a recorded merge put where they are (merges a
    re-analysis made do not count: they are the rules' doing), and those whose move by
    a re-analysis a person undid (an unmerge of a folded incident)."""
    out: set[int] = set()
    for merge in regrouping.live_merges(session):
        if (merge.source_state or {}).get("by") != BY:
            out |= {int(i) for i in (merge.moved or {}).get("occurrences") or []}
    for merge in regrouping.undone_merges(session):
        if (merge.source_state or {}).get("by") == BY:
            out |= {int(i) for i in (merge.moved or {}).get("occurrences") or []}
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


# ---- the dry run ------------------------------------------------------------------------


class _Planned(Repository):
    """The stored KB as the dry run has changed it so far, for the match: the routes
    earlier incidents dropped lead nowhere and are no candidates, the ones they claimed
    are candidates, and the term counts follow both (the apply has them stored)."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.dropped_routes: set[str] = set()
        self.dropped_rows: set[int] = set()
        self.added: list[Candidate] = []
        self.term_delta: Counter[str] = Counter()

    def drop(self, row: Any) -> None:
        self.dropped_routes.add(row.route_key)
        self.dropped_rows.add(row.id)
        if row.message_template:
            self.term_delta.subtract(_template_terms(row.message_template))

    def claim(self, incident_id: int, features: CrashFeatures) -> None:
        self.added.append(Candidate(incident_id, -1 - len(self.added), features))
        if features.message_template:
            self.term_delta.update(_template_terms(features.message_template))

    def head_by_route(self, route_key: str) -> Any:
        return None if route_key in self.dropped_routes else super().head_by_route(route_key)

    def candidates(self, keys: RecallKeys, limit: int) -> list[Candidate]:
        stored = [c for c in super().candidates(keys, limit) if c.fingerprint_id not in self.dropped_rows]
        return stored + [c for c in self.added if _recalled(keys, c.features)]

    def term_weights(self, wanted: Iterable[str]) -> TermWeights:
        wanted = {t[:120] for t in wanted}
        stored = super().term_weights(wanted)
        frequency = {t: stored.frequency.get(t, 0) + self.term_delta.get(t, 0) for t in wanted if t}
        return TermWeights(stored.documents + self.term_delta.get("", 0),
                           {t: n for t, n in frequency.items() if n > 0})


def _template_terms(template: str) -> set[str]:
    """The term rows a stored template counts in (Repository._count_terms)."""
    return {t[:120] for t in terms(template)} | {""}


def _recalled(keys: RecallKeys, features: CrashFeatures) -> bool:
    """Would the recall lookups (kb.core.recall.RecallKeys) bring this fingerprint?"""
    return (features.exception[:300] == keys.exception
            or message_key(features.message_template) in keys.message_keys
            or (keys.engine is not None and keys.phase is not None
                and features.engine == keys.engine and features.phase == keys.phase))


def plan(db: Database, candidate_limit: int = 200) -> Regrouping:
    """What `apply` would do, written nowhere: the same decisions in the same order, the
    routes earlier incidents would claim or drop kept in memory."""
    report = Regrouping()
    holders: dict[str, set[int]] = defaultdict(set)
    claimed: dict[str, int] = {}  # route -> incident (negative: a new one), by this run
    incoming: dict[int, list[Reanalyzed]] = defaultdict(list)
    folded: dict[int, int] = {}
    seen: set[int] = set()
    new_ids = iter(range(-1, -(1 << 62), -1))
    with db.read() as session:
        repo = _Planned(session)
        pinned = _pinned(session)

        def live(incident_id: int) -> int:
            while incident_id in folded:
                incident_id = folded[incident_id]
            return incident_id

        def owner_of(key: str) -> int | None:
            if key in claimed:
                return live(claimed[key])
            head = repo.head_by_route(key)
            return live(head.id) if head is not None else None

        for incident_id in regrouping.live_incident_ids(session):
            part = Regrouping()
            try:
                items = _reanalyze(session, incident_id, pinned, seen, part, write=False)
            except Exception as exc:  # noqa: BLE001 - an undecodable log: that incident only
                report.failures.append((incident_id, _first_line(exc)))
                continue
            items += incoming.pop(incident_id, [])
            seen.update(item.id for item in items)
            rows = {f.route_key: f for f in repo.fingerprints_of(incident_id)
                    if f.source == "upload" and f.route_key not in repo.dropped_routes}
            routes = set(rows) | {k for k, owner in claimed.items() if owner == incident_id}
            incident = repo.incident(incident_id)
            seeded = bool(incident and incident.seeded)
            decision = decide(repo, incident_id, items, owner_of, routes, candidate_limit, seeded)
            targets: list[int] = []
            for move in decision.moves:
                target = move.to if move.to is not None else next(new_ids)
                targets.append(target)
                if move.claims:
                    claimed[move.items[0].key or ""] = target
                    repo.claim(target, move.items[0].features)
                if target > 0:
                    # the apply writes them back before the target reads them: settled there
                    incoming[target] += [Reanalyzed(i.id, i.created_at, i.key, i.fingerprint,
                                                    i.features, i.title, False, True) for i in move.items]
            for item in decision.claims:
                claimed[item.key or ""] = incident_id
                repo.claim(incident_id, item.features)
            for key in decision.stale:
                claimed.pop(key, None)
                if key in rows:
                    repo.drop(rows[key])
                repo.dropped_routes.add(key)
            fold = _fold_target(decision, seeded, targets)
            if fold is not None:
                folded[incident_id] = fold
                part.folded.append((incident_id, fold))
            _tally(part, decision, holders, targets)
            _add(report, part)
    return _finish(report, holders)


def _add(report: Regrouping, part: Regrouping) -> None:
    for name in ("occurrences", "other_rulesets", "changed", "unidentified", "pinned",
                 "new_incidents", "routes_added", "routes_dropped", "rewritten"):
        setattr(report, name, getattr(report, name) + getattr(part, name))
    report.moves += part.moves
    report.splits.update(part.splits)
    report.folded += part.folded


# ---- the apply --------------------------------------------------------------------------


def apply(db: Database, candidate_limit: int = 200) -> Regrouping:
    """Re-analyze and regroup, one transaction per incident: an incident that fails (an
    undecodable log) is rolled back whole and listed; the others are applied. A
    database that stops answering stops the run (the error is raised)."""
    report = Regrouping(applied=True)
    holders: dict[str, set[int]] = defaultdict(set)
    seen: set[int] = set()
    with db.read() as session:
        incident_ids = regrouping.live_incident_ids(session)
        pinned = _pinned(session)
    for incident_id in incident_ids:
        part = Regrouping(applied=True)
        part_holders: dict[str, set[int]] = defaultdict(set)
        try:
            with db.write() as session:
                done = _apply_one(Repository(session), incident_id, pinned, seen, candidate_limit,
                                  part, part_holders)
        except IntegrityError as exc:  # a concurrent upload took a route first: next run
            report.failures.append((incident_id, _first_line(exc)))
            continue
        except SQLAlchemyError:
            raise
        except Exception as exc:  # noqa: BLE001 - an undecodable log: that incident only
            report.failures.append((incident_id, _first_line(exc)))
            continue
        seen |= done
        _add(report, part)
        for key, ids in part_holders.items():
            holders[key] |= ids
    return _finish(report, holders)


def _apply_one(repo: Repository, incident_id: int, pinned: set[int], seen: set[int],
               candidate_limit: int, report: Regrouping, holders: dict[str, set[int]]) -> set[int]:
    """One incident's re-analysis and regrouping, in the caller's transaction; returns
    the occurrences it analyzed."""
    session = repo.s
    incident = repo.incident(incident_id, lock=True)
    if incident is None or incident.merged_into_id is not None:
        return set()  # folded or merged since the run began
    items = _reanalyze(session, incident_id, pinned, seen, report, write=True)
    rows = {f.route_key: f for f in repo.fingerprints_of(incident_id) if f.source == "upload"}

    def owner_of(key: str) -> int | None:
        head = repo.head_by_route(key)
        return head.id if head is not None else None

    decision = decide(repo, incident_id, items, owner_of, rows, candidate_limit, incident.seeded)
    now = utcnow()
    touched: dict[int, Incident] = {incident_id: incident}
    targets: list[int] = []
    moved: dict[int, list[int]] = {}  # target -> occurrences, in the order of the moves
    for move in decision.moves:
        first = move.items[0]
        if move.to is None:
            target = _new_incident(repo, first, now)
        else:  # merged by a person since the decision: where it went
            found = repo.incident(repo.live_incident_id(move.to), lock=True)
            assert found is not None
            target = found
        touched[target.id] = target
        targets.append(target.id)
        if move.claims:
            _route(repo, target.id, first)
        ids = [item.id for item in move.items]
        regrouping.move_occurrences(session, ids, target.id)
        moved.setdefault(target.id, []).extend(ids)
    fold = _fold_target(decision, incident.seeded, targets)
    # One record a target; the fold's last, so an unmerge of the folded incident finds it.
    records: dict[int, IncidentMerge] = {}
    for target_id in sorted(moved, key=lambda t: t == fold):
        records[target_id] = IncidentMerge(
            source_id=incident_id, target_id=target_id,
            moved={"occurrences": moved[target_id], "fixes": [], "fingerprints": [], "facets": []},
            source_state={"by": BY, "ruleset": ruleset()}, created_at=now)
        session.add(records[target_id])
        session.flush()
    for item in decision.claims:
        _route(repo, incident_id, item)
    for key in decision.stale:
        repo.remove_fingerprint(rows[key])
    session.flush()
    if fold is not None:
        _fold(repo, incident, touched[fold], records[fold], now)
        report.folded.append((incident_id, fold))
    elif decision.home is not None and not incident.seeded:
        _represent(incident, decision.home)
    for touched_id in sorted(touched):
        _recount(repo, touched[touched_id], now)
    _tally(report, decision, holders, targets)
    return {item.id for item in items}


def _new_incident(repo: Repository, first: Reanalyzed, now: datetime) -> Incident:
    """An incident for an identity no stored incident has, as an upload would make it."""
    fp, features = first.fingerprint, first.features
    return repo.add_incident(
        title=first.title, engine=clip(features.engine, 40), phase=clip(features.phase, 40),
        fingerprint_hash=fp.hash, fingerprint_version=fp.version, signature=fp.signature,
        exception=fp.exception[:300] or None, tags=[], links=[], model_archs=[],
        gpu_families=[], occurrence_count=0, created_at=now, updated_at=now)


def _route(repo: Repository, incident_id: int, item: Reanalyzed) -> None:
    fp = item.fingerprint
    repo.add_fingerprint(incident_id, fp.version, fp.hash, item.key or "", item.features, "upload")


def _represent(incident: Incident, home: Reanalyzed) -> None:
    """An uploaded incident's representative fingerprint: the identity it keeps."""
    fp = home.fingerprint
    for name, value in (("fingerprint_hash", fp.hash), ("fingerprint_version", fp.version),
                        ("signature", fp.signature), ("exception", fp.exception[:300] or None)):
        if getattr(incident, name) != value:
            setattr(incident, name, value)


def _fold(repo: Repository, source: Incident, target: Incident, record: IncidentMerge,
          now: datetime) -> None:
    """The emptied uploaded incident joins `target` with its fixes and what routes to it
    left, recorded in the move's record so an unmerge brings all of it back."""
    state = {**record.source_state, "next_incident_id": source.next_incident_id,
             "recommended_path": source.recommended_path}
    moved = repo.move_incident_rows(source.id, target.id)
    record.moved = {**moved, "occurrences": record.moved["occurrences"]}
    record.source_state = state
    if target.next_incident_id is None and source.next_incident_id not in (None, target.id):
        target.next_incident_id = source.next_incident_id
    source.merged_into_id = target.id
    source.recommended_path = "investigate"
    source.updated_at = now
    repo.s.flush()


def _recount(repo: Repository, incident: Incident, now: datetime) -> None:
    """Counts, seen-on facets and recommendation of an incident whose occurrences changed,
    from what it holds now; written only where they differ."""
    session = repo.s
    before = (incident.occurrence_count, incident.first_seen, incident.last_seen)
    span = repo.occurrence_span(incident.id)
    if incident.merged_into_id is not None:
        span = (0, incident.first_seen, incident.last_seen)
    changed = before != span
    if changed:
        incident.occurrence_count, incident.first_seen, incident.last_seen = span
    if incident.merged_into_id is None:
        wanted = facet_values(
            [pair for arch, gpu, version in regrouping.occurrence_contexts(session, incident.id)
             for pair in (("model_arch", arch), ("gpu", gpu), ("gpu_family", gpu_family(gpu)),
                          ("engine_version", version.lstrip("v") if version else None))]
            + [("model_arch", a) for a in incident.model_archs or []]
            + [("gpu_family", g) for g in incident.gpu_families or []]
            + _merged_facets(repo, incident.id))
        current = regrouping.facets_of_kinds(session, incident.id, SEEN_ON)
        if current != wanted:
            regrouping.remove_facets(session, incident.id, current - wanted)
            repo.add_facets(incident.id, wanted - current)
            changed = True
        path = incident.recommended_path
        refresh_recommended_path(repo, incident)
        changed |= path != incident.recommended_path
    if changed:
        incident.updated_at = now
    session.flush()


def _merged_facets(repo: Repository, incident_id: int) -> list[tuple[str, str]]:
    """Seen-on facets a person's merge brought here (a seeded source's curated ones)."""
    out: list[tuple[str, str]] = []
    for merge in regrouping.live_merges(repo.s):
        if (merge.source_state or {}).get("by") == BY:
            continue
        if repo.live_incident_id(merge.target_id) == incident_id:
            out += [(k, v) for k, v in (merge.moved or {}).get("facets") or [] if k in SEEN_ON]
    return out
