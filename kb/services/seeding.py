"""Load the curated knowledge base from seeds/**/*.yaml (schema: seeds/README.md).

Idempotent upsert by slug, in one transaction:
- an incident whose seed file is unchanged (same content digest) keeps its fields and
  fixes, so re-running changes nothing and user edits (title, tags, notes) survive;
- an edited seed updates its incident and its seeded fixes (found by their seed key
  "<slug>#<n>"); user-added fixes, outcomes and occurrences are never touched;
- a seeded fix a person edited (PATCH /fixes/{id}, `edited_at` set) keeps its text when
  its seed changes: only the seed's curated worked/failed counts are applied, and a
  warning names the fix; dropped from the seed, it stays (like a fix with outcomes);
- every example log is analyzed on every run and the incident's seed fingerprints are
  made exactly those of its examples, so uploads of the examples match by fingerprint
  even after the analyzer's fingerprint version changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import text

from kb.core import fixschema
from kb.core.analyze import analyze
from kb.core.recommend import FIX_KINDS, PATHS
from kb.core.records import PHASES, CrashFeatures
from kb.db.models import Fix, Incident, utcnow
from kb.db.repositories import Repository
from kb.db.session import Database
from kb.services.advice import refresh_recommended_path
from kb.services.matching import route_key

log = logging.getLogger(__name__)

_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_PG_SEED_LOCK = 0x6B62_7365_6564  # serialises concurrent seeding on one Postgres


class SeedError(ValueError):
    pass


@dataclass(slots=True)
class SeedFix:
    key: str
    title: str
    kind: str
    description: str | None
    change: dict[str, Any]
    applies_to: dict[str, Any]
    worked: int
    failed: int


@dataclass(slots=True)
class Seed:
    path: Path
    digest: str
    slug: str
    title: str
    engine: str
    affected_versions: str | None
    fixed_in: str | None
    model_archs: list[str]
    gpu_families: list[str]
    phase: str | None
    engine_limitation: bool
    summary: str | None
    next: str | None
    links: list[str]
    tags: list[str]
    recommendation: str | None
    examples: list[tuple[str, str]]
    fixes: list[SeedFix]


@dataclass(slots=True)
class SeedReport:
    files: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    fixes_added: int = 0
    fixes_updated: int = 0
    fixes_removed: int = 0
    fingerprints_added: int = 0
    fingerprints_removed: int = 0
    merged: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.fixes_added or self.fixes_updated
                    or self.fixes_removed or self.fingerprints_added
                    or self.fingerprints_removed or self.merged)

    def summary(self) -> str:
        return (f"{self.files} seed file(s): {self.added} added, {self.updated} updated, "
                f"{self.unchanged} unchanged; fixes {self.fixes_added} added, "
                f"{self.fixes_updated} updated, {self.fixes_removed} removed; fingerprints "
                f"{self.fingerprints_added} added, {self.fingerprints_removed} removed"
                + (f"; {self.merged} duplicate incident(s) merged" if self.merged else "")
                + (f"; {len(self.errors)} error(s)" if self.errors else ""))


# ---- reading and validating ------------------------------------------------------------


def seed_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())


def _str_list(data: dict[str, Any], key: str, where: str) -> list[str]:
    value = data.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise SeedError(f"{where}: {key} must be a list of strings")
    return [str(v) for v in value]


def _opt_str(data: dict[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str | int | float):
        raise SeedError(f"{where}: {key} must be a string")
    return str(value).strip() or None


# libyaml's C parser when the wheel has it (manylinux wheels do): 10x faster on a 200-file
# seed folder, the same documents and errors as the pure-Python one
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(raw: bytes | str) -> Any:
    return yaml.load(raw, Loader=YAML_LOADER)  # noqa: S506 - a safe loader


def parse_seed(path: Path, raw: bytes | None = None) -> Seed:
    """The seed in file `path` (its bytes `raw` when given: a knowledge pack's member)."""
    where = str(path)
    raw = path.read_bytes() if raw is None else raw
    try:
        data = load_yaml(raw)
    except yaml.YAMLError as exc:
        raise SeedError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SeedError(f"{where}: a seed is a mapping (slug, title, engine, ...)")
    slug = data.get("slug")
    if not isinstance(slug, str) or not _SLUG.match(slug):
        raise SeedError(f"{where}: slug must be kebab-case, got {slug!r}")
    where = f"{path} ({slug})"
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        raise SeedError(f"{where}: title is required")
    engine = data.get("engine")
    try:
        fixschema.check_engine(engine, "engine")
        for key, check in (("affected_versions", fixschema.check_specifier),
                           ("fixed_in", fixschema.check_version),
                           ("gpu_families", fixschema.check_families)):
            if data.get(key) not in (None, []):
                check(data[key], key)
    except fixschema.RecordError as exc:
        raise SeedError(f"{where}: {exc}") from None
    phase = data.get("phase")
    if phase is not None and phase not in PHASES:
        raise SeedError(f"{where}: phase must be one of {', '.join(PHASES)}")
    recommendation = data.get("recommendation")
    if recommendation is not None and recommendation not in PATHS:
        raise SeedError(f"{where}: recommendation must be one of {', '.join(PATHS)}")
    limitation = data.get("engine_limitation", False)
    if not isinstance(limitation, bool):
        raise SeedError(f"{where}: engine_limitation must be true or false")
    nxt = data.get("next")
    if nxt is not None and (not isinstance(nxt, str) or not _SLUG.match(nxt)):
        raise SeedError(f"{where}: next must be a slug or null")
    examples = []
    for n, example in enumerate(data.get("examples") or []):
        if not isinstance(example, dict) or not isinstance(example.get("log"), str) \
                or not example["log"].strip():
            raise SeedError(f"{where}: examples[{n}] needs a non-empty log")
        examples.append((str(example.get("name") or f"example-{n + 1}"), example["log"]))
    fixes = []
    keys: set[str] = set()
    for n, fix in enumerate(data.get("fixes") or []):
        fwhere = f"{where}: fixes[{n}]"
        if not isinstance(fix, dict):
            raise SeedError(f"{fwhere} must be a mapping")
        if fix.get("kind") not in FIX_KINDS:
            raise SeedError(f"{fwhere}: kind must be one of {', '.join(FIX_KINDS)}")
        if not isinstance(fix.get("title"), str) or not fix["title"].strip():
            raise SeedError(f"{fwhere}: title is required")
        change = fix.get("change") or {}
        applies_to = fix.get("applies_to") or {}
        try:
            fixschema.check_fix(fix["kind"], change, applies_to)
        except fixschema.RecordError as exc:
            raise SeedError(f"{fwhere}.{exc}") from None
        counts = []
        for name in ("worked", "failed"):
            value = fix.get(name, 0) or 0
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SeedError(f"{fwhere}: {name} must be a count >= 0")
            counts.append(value)
        key = str(fix.get("key") or n + 1)
        if key in keys:
            raise SeedError(f"{fwhere}: duplicate key {key!r}")
        keys.add(key)
        fixes.append(SeedFix(key=key, title=fix["title"].strip(), kind=fix["kind"],
                             description=fix.get("description"), change=change,
                             applies_to=applies_to, worked=counts[0], failed=counts[1]))
    return Seed(
        path=path, digest=hashlib.sha256(raw).hexdigest(), slug=slug, title=title.strip(),
        engine=engine, affected_versions=_opt_str(data, "affected_versions", where),
        fixed_in=_opt_str(data, "fixed_in", where),
        model_archs=_str_list(data, "model_archs", where),
        gpu_families=[g.lower() for g in _str_list(data, "gpu_families", where)], phase=phase,
        engine_limitation=limitation, summary=data.get("summary"), next=nxt,
        links=_str_list(data, "links", where), tags=_str_list(data, "tags", where),
        recommendation=recommendation, examples=examples, fixes=fixes)


def read_seeds(root: Path) -> tuple[list[Seed], list[str]]:
    """Every valid seed under root, and one error line per invalid file."""
    seeds: list[Seed] = []
    errors: list[str] = []
    slugs: dict[str, Path] = {}
    if not root.is_dir():
        return [], [f"{root}: seeds folder not found (set KB_SEEDS_DIR)"]
    for path in seed_files(root):
        try:
            seed = parse_seed(path)
        except SeedError as exc:
            errors.append(str(exc))
            continue
        except OSError as exc:
            errors.append(f"{path}: {exc}")
            continue
        if seed.slug in slugs:
            errors.append(f"{path}: slug {seed.slug!r} already used by {slugs[seed.slug]}")
            continue
        slugs[seed.slug] = path
        seeds.append(seed)
    return seeds, errors


# ---- analysis of the examples (pure, before the transaction) -----------------------------


@dataclass(slots=True)
class ExamplePrint:
    name: str
    version: str
    hash: str
    route_key: str
    signature: str
    features: CrashFeatures


def fingerprint_examples(seed: Seed) -> list[ExamplePrint]:
    out: list[ExamplePrint] = []
    seen: set[str] = set()
    for name, log_text in seed.examples:
        analysis = analyze(log_text.encode("utf-8"))
        if analysis.context.engine is None:
            analysis.context.engine = seed.engine
        fp = analysis.fingerprint
        features = CrashFeatures.from_analysis(analysis)
        key = route_key(fp, features)
        if key in seen:
            continue
        seen.add(key)
        out.append(ExamplePrint(name, fp.version, fp.hash, key, fp.signature, features))
    return out


# ---- writing ---------------------------------------------------------------------------


def _set(obj: Any, name: str, value: Any) -> bool:
    if getattr(obj, name) != value:
        setattr(obj, name, value)
        return True
    return False


def _upsert_incident(repo: Repository, seed: Seed, prints: list[ExamplePrint],
                     report: SeedReport) -> Incident:
    incident = repo.incident_by_slug(seed.slug)
    now = utcnow()
    first = prints[0] if prints else None
    fields = {
        "slug": seed.slug, "title": seed.title, "engine": seed.engine,
        "affected_versions": seed.affected_versions,
        "fixed_in": seed.fixed_in, "model_archs": seed.model_archs,
        "gpu_families": seed.gpu_families, "phase": seed.phase,
        "engine_limitation": seed.engine_limitation, "summary": seed.summary,
        "links": seed.links, "tags": [t.lower() for t in seed.tags], "seeded": True,
        "seed_digest": seed.digest,
        "fingerprint_hash": first.hash if first else None,
        "fingerprint_version": first.version if first else None,
        "signature": first.signature if first else None,
        "exception": (first.features.exception[:300] or None) if first else None,
    }
    if incident is None:
        incident = repo.add_incident(**fields, occurrence_count=0, created_at=now,
                                     updated_at=now)
        report.added += 1
    elif incident.seed_digest != seed.digest:
        for name, value in fields.items():
            _set(incident, name, value)
        incident.updated_at = now
        report.updated += 1
    else:
        changed = False
        for name in ("fingerprint_hash", "fingerprint_version", "signature", "exception"):
            changed |= _set(incident, name, fields[name])  # a new analyzer version
        if changed:
            incident.updated_at = now
        report.unchanged += 1
        return incident
    repo.add_facets(incident.id, [("model_arch", a) for a in seed.model_archs]
                    + [("gpu_family", g) for g in seed.gpu_families])
    repo.replace_facets(incident.id, "tag", fields["tags"])
    _sync_fixes(repo, incident, seed, report)
    return incident


def _sync_fixes(repo: Repository, incident: Incident, seed: Seed, report: SeedReport) -> None:
    now = utcnow()
    wanted = {f"{seed.slug}#{f.key}": f for f in seed.fixes}
    for key, sf in wanted.items():
        fix = repo.fix_by_seed_key(key)
        values = {"title": sf.title[:500], "kind": sf.kind, "description": sf.description,
                  "change": sf.change, "applies_to": sf.applies_to,
                  "curated_worked": sf.worked, "curated_failed": sf.failed}
        if fix is None:
            repo.s.add(Fix(incident_id=incident.id, seeded=True, seed_key=key, created_at=now,
                           updated_at=now, **values))
            report.fixes_added += 1
            continue
        changed = False
        kept: list[str] = []
        for name, value in values.items():
            if fix.edited_at is not None and name not in ("curated_worked", "curated_failed"):
                if getattr(fix, name) != value:
                    kept.append(name)
                continue  # the person's edit wins over the seed file
            changed |= _set(fix, name, value)
        if kept:
            report.warnings.append(
                f"{seed.slug}: fix #{fix.id} ({key}) was edited by a person on "
                f"{fix.edited_at:%Y-%m-%d}; kept their {', '.join(kept)}, not the seed's")
        if changed:
            fix.updated_at = now
            report.fixes_updated += 1
    for fix in repo.fixes_of([incident.id]):
        if fix.seeded and fix.seed_key and fix.seed_key.startswith(f"{seed.slug}#") \
                and fix.seed_key not in wanted:
            if fix.edited_at is not None or repo.has_outcomes(fix.id):
                report.warnings.append(f"{seed.slug}: fix #{fix.id} ({fix.seed_key}) is no "
                                       f"longer in the seed; kept (edited or reported on)")
                continue  # people edited it or reported on it: keep their work
            repo.s.delete(fix)
            report.fixes_removed += 1
    repo.s.flush()


def _sync_fingerprints(repo: Repository, incident: Incident, seed: Seed,
                       prints: list[ExamplePrint], report: SeedReport) -> None:
    """Route every example's fingerprint to the seed's incident."""
    from kb.services.curate import merge_rows

    owner_id = repo.live_incident_id(incident.id)
    for p in prints:
        row = repo.fingerprint_by_route(p.route_key)
        if row is None:
            repo.add_fingerprint(owner_id, p.version, p.hash, p.route_key, p.features, "seed")
            report.fingerprints_added += 1
            continue
        holder_id = repo.live_incident_id(row.incident_id)
        if holder_id == owner_id:
            continue
        holder = repo.incident(holder_id)
        if holder is not None and not holder.seeded:
            # Someone uploaded this crash before the seed existed: the curated incident
            # absorbs that incident (its occurrences, fixes and fingerprints).
            owner = repo.incident(owner_id)
            assert owner is not None
            merge_rows(repo, holder, owner)
            report.merged += 1
            report.warnings.append(f"{seed.slug}: example {p.name!r} matched uploaded incident "
                                   f"#{holder_id}, merged into this seed's incident")
        else:
            report.warnings.append(
                f"{seed.slug}: example {p.name!r} has the same fingerprint as seeded incident "
                f"{holder.slug if holder else holder_id!r}; it cannot match both")


def _drop_stale_fingerprints(repo: Repository, incidents: list[Incident],
                             wanted: set[str], report: SeedReport) -> None:
    """Seed fingerprints no example produces any more (an edited example, a new
    analyzer version) stop routing uploads; upload fingerprints stay."""
    for owner_id in {repo.live_incident_id(i.id) for i in incidents}:
        for row in repo.fingerprints_of(owner_id):
            if row.source == "seed" and row.route_key not in wanted:
                repo.remove_fingerprint(row)
                report.fingerprints_removed += 1


def apply_seeds(db: Database, seeds: list[Seed]) -> SeedReport:
    report = SeedReport(files=len(seeds))
    prints = {seed.slug: fingerprint_examples(seed) for seed in seeds}
    with db.write() as session:
        repo = Repository(session)
        if repo.dialect == "postgresql":
            session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SEED_LOCK})
        incidents: dict[str, Incident] = {}
        for seed in seeds:
            incidents[seed.slug] = _upsert_incident(repo, seed, prints[seed.slug], report)
        session.flush()
        for seed in seeds:
            _sync_fingerprints(repo, incidents[seed.slug], seed, prints[seed.slug], report)
        _drop_stale_fingerprints(repo, list(incidents.values()),
                                 {p.route_key for ps in prints.values() for p in ps}, report)
        for seed in seeds:
            incident = incidents[seed.slug]
            target = None
            if seed.next:
                nxt = incidents.get(seed.next) or repo.incident_by_slug(seed.next)
                if nxt is None:
                    report.warnings.append(f"{seed.slug}: next {seed.next!r} is not a known slug")
                else:
                    target = nxt.id
            if _set(incident, "next_incident_id", target):
                incident.updated_at = utcnow()
        session.flush()
        for incident in repo.seeded_incidents():
            if incident.merged_into_id is None:
                refresh_recommended_path(repo, incident)
    return report


def seed_database(db: Database, root: Path) -> SeedReport:
    seeds, errors = read_seeds(root)
    report = apply_seeds(db, seeds)
    report.errors.extend(errors)
    for line in report.warnings:
        log.warning("seed: %s", line)
    return report


def seed_if_empty(db: Database, root: Path) -> SeedReport | None:
    """Load the seeds when the database has no incident yet (first start)."""
    with db.read() as session:
        if Repository(session).count_incidents():
            return None
    return seed_database(db, root)


def dump_seed(seed: Seed) -> str:  # pragma: no cover - debugging aid
    return json.dumps({"slug": seed.slug, "title": seed.title}, indent=2)
