"""Grouping measured through the production path: the same prepare -> analyze -> match
-> store code an upload runs, on throwaway SQLite databases, so the figure is the one
users get (kb.core.evaluate scores pairs and never forms incidents).

Leave-one-out: for each case, a fresh unseeded database receives every other case as an
upload (in id order, so incidents form as the service forms them); then the case itself
is matched (POST /analyze's path). A case whose class recurs is right when the answer is
"known" and the incident's stored cases are mostly of its class; a one-of-a-kind case is
right when the answer is not "known". Precision of "known": the share of "known" answers
whose incident is mostly of the case's class."""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kb.core.evaluate import Case
from kb.core.match import engines_differ
from kb.db.migrate import upgrade
from kb.db.session import Database
from kb.services.errors import InvalidInput, NotText, TooLarge
from kb.services.ingest import Overrides, PreparedUpload, answer, prepare_upload, store_upload

MAX_BYTES = 256 << 20


@dataclass(slots=True)
class HeldOut:
    id: str
    failure_class: str
    status: str  # known | similar | new | refused
    score: float = 0.0
    incident_classes: list[str] = field(default_factory=list)  # of the stored cases it joined
    right: bool = False
    # another case of its class could be "known" to it at all: one identified in the log
    # and of an engine the gate lets match (kb.core.match.engines_differ)
    reachable: bool = False
    # the top incident is of its class, answered "known" or only "similar" (shown, not joined)
    top_right: bool = False

    @property
    def majority(self) -> str | None:
        return Counter(self.incident_classes).most_common(1)[0][0] if self.incident_classes else None


@dataclass(slots=True)
class GroupingReport:
    results: list[HeldOut]
    recurring: int
    singletons: int

    def _share(self, chosen: list[HeldOut]) -> float | None:
        return sum(r.right for r in chosen) / len(chosen) if chosen else None

    def rr_at_1(self, classes: Counter[str]) -> float | None:
        return self._share([r for r in self.results if classes[r.failure_class] > 1])

    def top_incident(self, classes: Counter[str]) -> float | None:
        """Share of recurring-class cases whose top incident is of their class, "known" or
        "similar": what a person is shown first, grouped or not."""
        chosen = [r for r in self.results if classes[r.failure_class] > 1]
        return sum(r.top_right for r in chosen) / len(chosen) if chosen else None

    def kept_new(self, classes: Counter[str]) -> float | None:
        return self._share([r for r in self.results if classes[r.failure_class] == 1])

    def rr_at_1_reachable(self, classes: Counter[str]) -> tuple[float | None, int]:
        """RR@1 over the recurring-class cases another case of the class could be known
        to: the engine gate (a crash of another engine is never known automatically) and
        logs that do not show their cause set the others out of reach of any matcher."""
        chosen = [r for r in self.results if classes[r.failure_class] > 1 and r.reachable]
        return self._share(chosen), len(chosen)

    def known_precision(self) -> float | None:
        known = [r for r in self.results if r.status == "known"]
        return sum(r.majority == r.failure_class for r in known) / len(known) if known else None


def _prepare(cases: list[Case]) -> dict[str, PreparedUpload | None]:
    prepared: dict[str, PreparedUpload | None] = {}
    for case in cases:
        try:
            prepared[case.id] = prepare_upload(case.log, Overrides(), max_bytes=MAX_BYTES)
        except (InvalidInput, NotText, TooLarge):
            prepared[case.id] = None  # the service refuses it: it never joins an incident
    return prepared


def leave_one_out(cases: list[Case], workers: int | None = None) -> GroupingReport:
    """Each case against a database of all the others, built as the service builds one.
    The database of "every case but k" is the one of the cases before k (a snapshot of
    a growing prefix, copied by SQLite's backup) plus the cases after k: half the uploads
    of building each from empty, and the same result. Ranges of held-out cases run in
    parallel processes (early cases cost more: their suffix is longer)."""
    ordered = sorted(cases, key=lambda c: c.id)
    workers = max(1, min(workers or os.cpu_count() or 1, 8, len(ordered)))
    bounds = _balanced_bounds(len(ordered), workers)
    if workers == 1:
        results = _held_out_range(ordered, 0, len(ordered))
    else:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            parts = pool.map(_held_out_range, [ordered] * workers, bounds[:-1], bounds[1:])
            results = [r for part in parts for r in part]
    classes = Counter(str(c.label.get("failure_class")) for c in cases)
    return GroupingReport(results, sum(classes[r.failure_class] > 1 for r in results),
                          sum(classes[r.failure_class] == 1 for r in results))


def _balanced_bounds(n: int, parts: int) -> list[int]:
    """Split points of 0..n such that each part holds about the same uploads: held-out
    case k costs its prefix's catch-up plus n - k uploads."""
    total = n * (n + 1) / 2
    bounds, done, k = [0], 0.0, 0
    for part in range(1, parts):
        while k < n and done < total * part / parts:
            done += n - k
            k += 1
        bounds.append(k)
    bounds.append(n)
    return bounds


def _held_out_range(ordered: list[Case], start: int, stop: int) -> list[HeldOut]:
    classes = Counter(str(c.label.get("failure_class")) for c in ordered)
    class_of = {c.id: str(c.label.get("failure_class")) for c in ordered}
    prepared = _prepare(ordered)
    prefix, run = Database("sqlite://", pool_size=1), Database("sqlite://", pool_size=1)
    upgrade(prefix.engine)
    prefix_incidents: dict[str, int] = {}  # case id -> incident, in the prefix database
    results: list[HeldOut] = []
    try:
        for position, case in enumerate(ordered[:stop]):
            held = prepared[case.id]
            if position >= start:
                if held is None:
                    results.append(HeldOut(case.id, class_of[case.id], "refused",
                                           right=classes[class_of[case.id]] == 1))
                else:
                    prefix.copy_to(run)
                    incident_of = dict(prefix_incidents)
                    for other in ordered[position + 1:]:
                        upload = prepared[other.id]
                        if upload is not None:
                            incident_of[other.id] = _store(run, upload)
                    got = answer(run, held.analysis, held.features)
                    result = _judge(case.id, class_of, classes, got.match.status,
                                    got.match.score, got.match.incident_id, incident_of)
                    result.reachable = _reachable(case, ordered, prepared, class_of)
                    results.append(result)
            if held is not None:
                prefix_incidents[case.id] = _store(prefix, held)
    finally:
        prefix.dispose()
        run.dispose()
    return results


def _reachable(case: Case, ordered: list[Case], prepared: dict[str, PreparedUpload | None],
               class_of: dict[str, str]) -> bool:
    held = prepared[case.id]
    if held is None or not _identifies(held):
        return False
    return any(other.id != case.id and class_of[other.id] == class_of[case.id]
               and (upload := prepared[other.id]) is not None and _identifies(upload)
               and not engines_differ(held.features, upload.features) for other in ordered)


def _identifies(upload: PreparedUpload) -> bool:
    return upload.analysis.verdict == "found" and bool(upload.features.exception or upload.features.message_template)


def _store(db: Database, upload: PreparedUpload) -> int:
    stored = store_upload(db, upload)
    assert stored.incident is not None
    return stored.incident.id


def _judge(case_id: str, class_of: dict[str, str], classes: Counter[str], status: str,
           score: float, incident_id: int | None, incident_of: dict[str, int]) -> HeldOut:
    failure_class = class_of[case_id]
    result = HeldOut(case_id, failure_class, status, score)
    if status in ("known", "similar") and incident_id is not None:
        result.incident_classes = [class_of[c] for c, i in incident_of.items() if i == incident_id]
        result.top_right = classes[failure_class] > 1 and result.majority == failure_class
    if status == "known" and incident_id is not None:
        result.right = result.top_right
    else:
        result.right = classes[failure_class] == 1
    return result


@dataclass(slots=True)
class SeedVerdict:
    id: str
    failure_class: str
    status: str  # known | similar | new | refused
    slug: str | None  # the seed incident a "known" answer named
    right: bool  # "known", and the incident is tagged with the case's class
    wrong_fix: bool  # "known" with fixes, and the incident is not the case's class


@dataclass(slots=True)
class SeedReport:
    """What the shipped knowledge base says of each case, through the production path
    (a freshly seeded database, POST /analyze's matching and advice). A seed incident
    covers a corpus class when the class slug is one of its tags."""

    results: list[SeedVerdict]
    incidents: int
    recurring: int  # cases whose class has two or more cases
    uncovered: list[str]  # corpus classes no seed incident is tagged with

    def recognized(self, classes: Counter[str]) -> float | None:
        """Share of recurring-class cases answered "known" with the right incident."""
        chosen = [r for r in self.results if classes[r.failure_class] > 1]
        return sum(r.right for r in chosen) / len(chosen) if chosen else None

    def wrong_fix(self) -> float:
        """Share of all cases given a wrong incident's fixes as "known"."""
        return sum(r.wrong_fix for r in self.results) / (len(self.results) or 1)


def against_seeds(cases: list[Case], seeds_dir: Path, cache_dir: Path) -> SeedReport:
    from kb.core.analyze import analyze
    from kb.core.textlog import LogRejected, prepare_log
    from kb.services.ingest import with_overrides
    from kb.services.localkb import local_database
    from kb.services.seeding import read_seeds

    seeds, _ = read_seeds(seeds_dir)
    tags = {seed.slug: set(seed.tags) for seed in seeds}
    covered = set().union(*tags.values()) if tags else set()
    db = local_database(seeds_dir, cache_dir)
    results: list[SeedVerdict] = []
    try:
        for case in cases:
            failure_class = str(case.label.get("failure_class"))
            try:
                analysis = analyze(prepare_log(case.log, MAX_BYTES))
            except LogRejected:
                results.append(SeedVerdict(case.id, failure_class, "refused", None, False, False))
                continue
            analysis, features = with_overrides(analysis, Overrides())
            got = answer(db, analysis, features)
            slug = got.incident.slug if got.incident is not None else None
            right = slug is not None and failure_class in tags.get(slug, set())
            wrong = got.match.status == "known" and not right and bool(got.fixes)
            results.append(SeedVerdict(case.id, failure_class, got.match.status, slug, right, wrong))
    finally:
        db.dispose()
    classes = Counter(str(c.label.get("failure_class")) for c in cases)
    return SeedReport(results, len(seeds), sum(classes[r.failure_class] > 1 for r in results),
                      sorted(c for c in classes if c not in covered))
