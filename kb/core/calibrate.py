"""Choosing the matcher's "known" threshold and term mix (kb.core.match) from labeled
cases by cross-validation, so the constants are measured, not guessed. Pure.

Each case's nearest other case (the scorer over all pairs, IDF weights over the cases'
templates) decides: at threshold t the case is "known" when that score reaches t and the
engines do not differ. Right: a case whose class recurs is known to a case of its class;
a one-of-a-kind case is not known. Per fold, the (mix, threshold) with the most right
decisions among those whose "known" precision on the other folds is at least
TARGET_PRECISION is chosen (the most precise one when none reaches it) and judged on the
held-out fold; the figures printed are the held-out ones."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kb.core.match import engines_differ, score
from kb.core.recall import TermWeights
from kb.core.records import CrashFeatures

TARGET_PRECISION = 0.98
THRESHOLDS = tuple(float(t) for t in range(60, 97, 2))
MIXES = (0.0, 0.25, 0.5, 0.75)
FOLDS = 5


@dataclass(frozen=True, slots=True)
class Labeled:
    id: str
    failure_class: str
    features: CrashFeatures
    identifies: bool  # the analysis found the cause (else never matched)


@dataclass(frozen=True, slots=True)
class Choice:
    mix: float
    threshold: float


@dataclass(slots=True)
class Figures:
    rr_at_1: float | None  # recurring classes: known to a case of the class
    kept_new: float | None  # one-of-a-kind: not known
    precision: float | None  # of "known"
    right: int = 0


@dataclass(slots=True)
class Calibration:
    chosen: Choice  # on all cases
    held_out: Figures  # cross-validated
    per_fold: list[Choice]


def _nearest(cases: list[Labeled], mix: float) -> list[tuple[int, float, bool]]:
    """(index of the nearest other case, its score, engines differ) per case."""
    weights = TermWeights.over(c.features.message_template for c in cases if c.identifies)
    out = []
    for i, case in enumerate(cases):
        best, best_score, other_engine = -1, -1.0, False
        if case.identifies:
            for j, other in enumerate(cases):
                if j == i or not other.identifies:
                    continue
                value = score(case.features, other.features, weights, mix).score
                if value > best_score:
                    best, best_score = j, value
                    other_engine = engines_differ(case.features, other.features)
        out.append((best, best_score, other_engine))
    return out


def _figures(cases: list[Labeled], nearest: list[tuple[int, float, bool]], threshold: float,
             chosen: list[int], classes: Counter[str]) -> Figures:
    recurring = singletons = recurring_right = singletons_right = known = known_right = 0
    for i in chosen:
        j, value, other_engine = nearest[i]
        is_known = j >= 0 and value >= threshold and not other_engine
        same = is_known and cases[j].failure_class == cases[i].failure_class
        known += is_known
        known_right += same
        if classes[cases[i].failure_class] > 1:
            recurring += 1
            recurring_right += same
        else:
            singletons += 1
            singletons_right += not is_known
    return Figures(recurring_right / recurring if recurring else None,
                   singletons_right / singletons if singletons else None,
                   known_right / known if known else None, recurring_right + singletons_right)


def _best(cases: list[Labeled], table: dict[float, list[tuple[int, float, bool]]], chosen: list[int],
          classes: Counter[str]) -> Choice:
    scored = []
    for mix, nearest in table.items():
        for threshold in THRESHOLDS:
            f = _figures(cases, nearest, threshold, chosen, classes)
            precise = f.precision is None or f.precision >= TARGET_PRECISION
            scored.append(((precise, f.right if precise else f.precision or 0.0, threshold), Choice(mix, threshold)))
    return max(scored, key=lambda item: item[0])[1]


def calibrate(cases: list[Labeled], folds: int = FOLDS) -> Calibration:
    classes = Counter(c.failure_class for c in cases)
    table = {mix: _nearest(cases, mix) for mix in MIXES}
    indices = list(range(len(cases)))
    per_fold: list[Choice] = []
    held: list[tuple[int, Choice]] = []
    for fold in range(folds):
        test = [i for i in indices if i % folds == fold]
        train = [i for i in indices if i % folds != fold]
        choice = _best(cases, table, train, classes)
        per_fold.append(choice)
        held.extend((i, choice) for i in test)
    right = Counter()
    totals = Counter()
    known = known_right = 0
    for i, choice in held:
        f = _figures(cases, table[choice.mix], choice.threshold, [i], classes)
        kind = "recurring" if classes[cases[i].failure_class] > 1 else "singleton"
        totals[kind] += 1
        right[kind] += f.right
        if f.precision is not None:
            known += 1
            known_right += f.precision == 1.0
    held_out = Figures(right["recurring"] / totals["recurring"] if totals["recurring"] else None,
                       right["singleton"] / totals["singleton"] if totals["singleton"] else None,
                       known_right / known if known else None, right["recurring"] + right["singleton"])
    return Calibration(_best(cases, table, indices, classes), held_out, per_fold)
