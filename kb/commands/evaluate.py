"""`kb eval DIR`: accuracy of the analyzer and the matcher on labeled cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kb.core.analyze import analyze
from kb.core.evaluate import Case, evaluate as run_evaluation
from kb.core.records import CrashFeatures

DEFAULT_SEEDS = Path(__file__).resolve().parents[2] / "seeds"


def load_cases(directory: Path) -> list[Case]:
    cases = []
    for label_path in sorted(directory.glob("*.json")):
        log_path = label_path.with_suffix(".log")
        if not log_path.exists():
            continue
        try:
            label = json.loads(label_path.read_text())
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"{label_path}: not valid JSON ({exc})") from None
        _check_label(label_path, label)
        cases.append(Case(label.get("id", label_path.stem), log_path.read_bytes(), label))
    return cases


_OBJECT_FIELDS = ("root_cause", "gpu", "parallel", "fix")


def _check_label(path: Path, label: Any) -> None:
    """A label the figures can read (shared/corpus/README.md), else a clear error naming
    the file and the field: an answer key with a wrong shape is fixed, not guessed at."""
    if not isinstance(label, dict):
        raise click.ClickException(f"{path}: a label is a JSON object, got {type(label).__name__}")
    for field in _OBJECT_FIELDS:
        if label.get(field) is not None and not isinstance(label[field], dict):
            raise click.ClickException(f"{path}: '{field}' must be an object or null, "
                                       f"got {type(label[field]).__name__} ({label[field]!r})")
    for field in ("root_cause_alternates", "wrapper_exceptions"):
        if label.get(field) is not None and not isinstance(label[field], list):
            raise click.ClickException(f"{path}: '{field}' must be a list, got {type(label[field]).__name__}")
    if any(not isinstance(alternate, dict) for alternate in label.get("root_cause_alternates") or []):
        raise click.ClickException(f"{path}: each of 'root_cause_alternates' must be an object")


@click.command("eval")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--against-seeds", "seeds_dir", is_flag=False, flag_value=str(DEFAULT_SEEDS), default=None,
              type=click.Path(), help="Also report what the seed knowledge base (default: the bundled "
              "seeds) answers for each case, through the service's matching and advice.")
@click.option("--subset", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A file of case ids (one a line, e.g. BATCH2.txt): also print the root cause figure on them.")
@click.option("--shapes", is_flag=True, help="Re-capture every case in each capture shape (journald, srun, ...) "
              "and print root-cause accuracy per shape and agreement with the plain log.")
@click.option("--calibrate", is_flag=True, help="Choose the matcher's known threshold and term mix by "
              "cross-validation and print the held-out figures.")
@click.option("--grouping/--no-grouping", default=True, help="Grouping through the production path "
              "(leave-one-out on throwaway databases; the slow part).")
@click.option("-v", "--verbose", is_flag=True, help="One line per case.")
def evaluate(directory: Path, seeds_dir: str | None, subset: Path | None, shapes: bool,
             calibrate: bool, grouping: bool, verbose: bool) -> None:
    """Root-cause, context and grouping accuracy on a folder of labeled cases
    (<id>.log + <id>.json as in shared/corpus/README.md)."""
    cases = load_cases(directory)
    if not cases:
        raise click.ClickException(f"no labeled cases (<id>.json + <id>.log) in {directory}")
    if shapes:
        from kb.core.evaluate import evaluate_shapes

        click.echo(f"cases: {len(cases)}")
        click.echo(f"{'shape':<20} {'root cause':>10} {'same as plain':>14}")
        for shape, figures in evaluate_shapes(cases).items():
            click.echo(f"{shape:<20} {figures['root_cause']:>10.1%} {figures['same_as_plain']:>14.1%}")
        return
    if calibrate:
        _print_calibration(cases)
        return
    if seeds_dir and not any(Path(seeds_dir).rglob("*.yaml")):
        raise click.ClickException(f"no seed incidents found under {seeds_dir}")
    report = run_evaluation(cases)
    results = report["results"]
    if verbose:
        for r in results:
            mark = "ok " if r.recoverable else "BAD"
            bad_ctx = [k for k, ok in r.context.items() if ok is False]
            click.echo(f"{mark} {r.id:<22} {r.failure_class:<40} got {r.got[:70]!r}")
            if not r.recoverable:
                click.echo(f"      expected {r.expected[:90]!r}")
            if bad_ctx:
                click.echo(f"      context wrong: {', '.join(bad_ctx)}")
    n = report["cases"]
    click.echo(f"cases: {n}")
    click.echo(f"root cause (type and message): {report['root_cause']:.1%}  "
               f"[strict, truncated excerpts counted wrong: {report['root_cause_strict']:.1%}; type only: {report['exception_type']:.1%}]")
    if subset is not None:
        wanted = set(subset.read_text().split())
        chosen = [r for r in results if r.id in wanted]
        if chosen:
            click.echo(f"root cause on the {len(chosen)} cases of {subset.name}: "
                       f"{sum(r.recoverable for r in chosen) / len(chosen):.1%}")
    click.echo("context per field: right of the cases labeled (wrong; the rest left unsaid):")
    for name, (accuracy, count, wrong) in report["context"].items():
        click.echo(f"  {name:<15} {accuracy:6.1%}  of {count:<4} (wrong {wrong})")
    if grouping:
        _print_grouping(cases, results if verbose else None)
    if seeds_dir:
        _print_against_seeds(cases, Path(seeds_dir), verbose)


def _print_against_seeds(cases: list[Case], seeds_dir: Path, verbose: bool) -> None:
    import tempfile
    from collections import Counter

    from kb.services.evaluation import against_seeds

    with tempfile.TemporaryDirectory(prefix="kb-eval-seeds-") as cache:
        report = against_seeds(cases, seeds_dir, Path(cache))
    classes = Counter(str(c.label.get("failure_class")) for c in cases)
    recognized = report.recognized(classes)
    wrong = [r.id for r in report.results if r.wrong_fix]
    click.echo(f"seed knowledge base ({report.incidents} incidents), through the service's matching:")
    click.echo(f"  right incident (class in its tags), recurring-class cases: "
               f"{'n/a' if recognized is None else f'{recognized:.1%}'} of {report.recurring}")
    click.echo(f"  a wrong incident's fix as known, all cases:               {report.wrong_fix():.1%}"
               + (f" ({', '.join(wrong)})" if wrong else ""))
    recurring_uncovered = [c for c in report.uncovered if classes[c] > 1]
    click.echo(f"  corpus classes without a seed incident: {len(report.uncovered)} of {len(classes)}"
               f" ({len(recurring_uncovered)} recurring)")
    for name in report.uncovered:
        click.echo(f"    {name} ({classes[name]})")
    if verbose:
        for r in report.results:
            if not r.right and classes[r.failure_class] > 1:
                click.echo(f"  seed miss {r.id:<22} {r.failure_class:<40} {r.status} {r.slug or ''}")


def _print_grouping(cases: list[Case], verbose_results: list | None) -> None:
    from collections import Counter

    from kb.services.evaluation import leave_one_out

    report = leave_one_out(cases)
    classes = Counter(str(c.label.get("failure_class")) for c in cases)
    figure = (lambda value: "n/a" if value is None else f"{value:.1%}")
    click.echo("grouping through the service (leave-one-out, fresh unseeded database):")
    click.echo(f"  recurring classes, known to an incident of the class (RR@1): {figure(report.rr_at_1(classes))} of {report.recurring}")
    reachable, count = report.rr_at_1_reachable(classes)
    click.echo(f"    of those another case could be known to at all: {figure(reachable)} of {count}  "
               "(same or compatible engine, cause in the log)")
    click.echo(f"  recurring classes, top incident shown is of the class, known or similar: {figure(report.top_incident(classes))}")
    click.echo(f"  one-of-a-kind kept new:                             {figure(report.kept_new(classes))} of {report.singletons}")
    click.echo(f"  precision of \"known\":                              {figure(report.known_precision())}")
    if verbose_results is not None:
        for r in report.results:
            if not r.right:
                click.echo(f"  grouping BAD {r.id:<22} {r.failure_class:<40} {r.status} {r.score:.1f}"
                           + (f" -> incident of {r.majority}" if r.majority else ""))


def _print_calibration(cases: list[Case]) -> None:
    from kb.core.calibrate import TARGET_PRECISION, Labeled, calibrate
    from kb.core.match import KNOWN_THRESHOLD, TERM_MIX

    labeled = []
    for case in cases:
        analysis = analyze(case.log)
        labeled.append(Labeled(case.id, str(case.label.get("failure_class")),
                               CrashFeatures.from_analysis(analysis), analysis.identifies))
    result = calibrate(labeled)
    figure = (lambda value: "n/a" if value is None else f"{value:.1%}")
    click.echo(f"cases: {len(cases)}; target precision of known >= {TARGET_PRECISION:.0%}")
    click.echo(f"chosen on all cases: known threshold {result.chosen.threshold:.0f}, term mix {result.chosen.mix}"
               f"  (in kb.core.match now: {KNOWN_THRESHOLD:.0f}, {TERM_MIX})")
    click.echo("per fold: " + ", ".join(f"{c.threshold:.0f}/{c.mix}" for c in result.per_fold))
    click.echo(f"held out (nearest case): RR@1 {figure(result.held_out.rr_at_1)}, kept new "
               f"{figure(result.held_out.kept_new)}, precision of known {figure(result.held_out.precision)}")
