"""Knowledge packs: what a team curated (incidents, fixes, outcomes, fix chains, links),
exported as seed files (seeds/README.md, one YAML per incident) and imported into another
team's knowledge base.

Export writes `<engine>/<slug>.yaml` per live incident. An incident created by uploads
gets a slug at its first export, and a fix people added a key ("<slug>#local-<id>"), both
stored, so every later export names them the same and an import updates them instead of
adding them twice. Its examples are the stored (redacted) logs
of its newest occurrences, one per fingerprint; a curated incident's examples are those of
its seed file when KB_SEEDS_DIR has it. Beyond the seed schema a pack carries `notes`, and
per fix `author` and `outcomes` (each recorded outcome); `kb seed --path` ignores them.

Import checks every file first (kb.services.seeding.parse_seed, kb.core.fixschema) and
refuses the whole pack naming the file and the field; then merges it in one transaction:
- an incident is found by slug and a fix by its key ("<slug>#<key>"); a missing one is
  added, a differing one updated, an equal one left alone (a second import changes nothing);
- only the fields a file holds are compared: a pack never clears what it does not mention;
- what a person edited here (`edited_at` on the incident or the fix) is kept and reported
  as a conflict, unless `overwrite` is asked for;
- outcomes are added once (same fix, result, time, reporter and place), never removed;
  nothing is ever deleted;
- the examples' fingerprints route to the incident (source "pack"), unless one already
  routes to another incident here (a warning says so).
"""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from sqlalchemy import text

from kb.core.redact import redact_field
from kb.db import packs as pack_queries
from kb.db.logcodec import decompress_log
from kb.db.models import Fix, FixOutcome, Incident, utcnow
from kb.db.repositories import Repository
from kb.db.session import Database
from kb.services.advice import refresh_recommended_path
from kb.services.errors import InvalidInput, NotFound
from kb.services.seeding import (
    ExamplePrint,
    Seed,
    SeedError,
    fingerprint_examples,
    load_yaml,
    parse_seed,
    read_seeds,
)

_PG_PACK_LOCK = 0x6B62_7061_636B  # serialises exports and imports on one Postgres (slugs, keys)
EXAMPLES_PER_INCIDENT = 3
EXAMPLE_BYTES = 128 * 1024  # a longer log keeps its head and its tail (where crashes are)
MAX_PACK_FILES = 5000
OUTCOME_KEYS = ("worked", "note", "engine", "engine_version", "model_arch", "gpu", "reporter", "at")

# The incident fields a pack carries, as the seed file names them -> the column.
INCIDENT_FIELDS = {
    "title": "title", "engine": "engine", "affected_versions": "affected_versions",
    "fixed_in": "fixed_in", "model_archs": "model_archs", "gpu_families": "gpu_families",
    "phase": "phase", "engine_limitation": "engine_limitation", "summary": "summary",
    "links": "links", "tags": "tags", "notes": "notes",
}
FIX_FIELDS = {"title": "title", "kind": "kind", "description": "description", "change": "change",
              "applies_to": "applies_to", "worked": "curated_worked", "failed": "curated_failed",
              "author": "author"}
EDITABLE_FIX_FIELDS = ("title", "kind", "description", "change", "applies_to")


# ---- reports ---------------------------------------------------------------------------


@dataclass(slots=True)
class PackChange:
    """An incident or fix the import added or changed: `fix` is its key, None for the
    incident itself; `fields` what changed."""

    slug: str
    fix: str | None = None
    fields: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PackConflict:
    """A local edit that differs from the pack: kept, unless the import overwrote it."""

    slug: str
    fix: str | None
    fields: list[str]
    edited_at: datetime | None
    overwritten: bool


@dataclass(slots=True)
class ImportReport:
    """What `kb import` / POST /import did."""

    files: int = 0
    added: list[PackChange] = field(default_factory=list)
    changed: list[PackChange] = field(default_factory=list)
    unchanged: int = 0
    fixes_added: list[PackChange] = field(default_factory=list)
    fixes_changed: list[PackChange] = field(default_factory=list)
    outcomes_added: int = 0
    fingerprints_added: int = 0
    conflicts: list[PackConflict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def did_change(self) -> bool:
        return bool(self.added or self.changed or self.fixes_added or self.fixes_changed
                    or self.outcomes_added or self.fingerprints_added
                    or any(c.overwritten for c in self.conflicts))

    def summary(self) -> str:
        kept = sum(not c.overwritten for c in self.conflicts)
        return (f"{self.files} file(s): incidents {len(self.added)} added, {len(self.changed)} "
                f"changed, {self.unchanged} unchanged; fixes {len(self.fixes_added)} added, "
                f"{len(self.fixes_changed)} changed; {self.outcomes_added} outcome(s) and "
                f"{self.fingerprints_added} fingerprint(s) added; "
                f"{len(self.conflicts)} conflict(s) with local edits"
                + (f" ({kept} kept, {len(self.conflicts) - kept} overwritten)" if self.conflicts else ""))

    def lines(self) -> list[str]:
        """One line per addition, change, conflict and warning, for a terminal."""
        out = [f"added {c.slug}" for c in self.added]
        out += [f"changed {c.slug}: {', '.join(c.fields)}" for c in self.changed]
        out += [f"added fix {c.fix}" for c in self.fixes_added]
        out += [f"changed fix {c.fix}: {', '.join(c.fields)}" for c in self.fixes_changed]
        for c in self.conflicts:
            what = f"fix {c.fix}" if c.fix else c.slug
            when = f" on {c.edited_at:%Y-%m-%d}" if c.edited_at else ""
            verdict = ("overwritten by the pack (--overwrite)" if c.overwritten
                       else "kept the local edit (use --overwrite to take the pack's)")
            out.append(f"conflict {what}: {', '.join(c.fields)} edited here{when}; {verdict}")
        out += [f"warning: {w}" for w in self.warnings]
        return out


# ---- export ------------------------------------------------------------------------------


def _serialise(repo: Repository) -> None:
    """Two exports stamping slugs, or two imports adding one incident, wait for each
    other on Postgres instead of colliding on the unique slug (SQLite writes one at a time)."""
    if repo.dialect == "postgresql":
        repo.s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_PACK_LOCK})


def slug_for(incident: Incident) -> str:
    """A kebab-case slug for an incident created by uploads: engine, title, and the head
    of its fingerprint (or id) so two crashes with one title do not collide."""
    words = re.sub(r"[^a-z0-9]+", "-", f"{incident.engine or 'crash'} {incident.title}".lower())
    tail = (incident.fingerprint_hash or f"id{incident.id}")[:8].lower()
    tail = re.sub(r"[^a-z0-9]+", "", tail) or f"id{incident.id}"
    return f"{words.strip('-')[:80].strip('-')}-{tail}".strip("-")


def _assign_slugs(repo: Repository, incidents: list[Incident]) -> None:
    taken = {i.slug for i in incidents if i.slug}
    for incident in incidents:
        if incident.slug:
            continue
        base = slug_for(incident)
        slug, n = base, 2
        while slug in taken or repo.incident_by_slug(slug) is not None:
            slug, n = f"{base}-{n}", n + 1
        incident.slug = slug
        taken.add(slug)


def _clip_log(text: str) -> str:
    if len(text.encode()) <= EXAMPLE_BYTES:
        return text
    head, tail = text[: EXAMPLE_BYTES // 4], text[-(EXAMPLE_BYTES * 3 // 4):]
    head = head[: head.rfind("\n") + 1] or head
    tail = tail[tail.find("\n") + 1:] or tail
    return f"{head}[kb: the middle of this log was cut for the pack]\n{tail}"


def _fix_key(fix: Fix, slug: str) -> str:
    """The fix's key in the seed file: its seed key's own part under this slug; the whole
    seed key when a merge brought it from another incident (`other-slug#1`, which an
    import looks up as it is)."""
    assert fix.seed_key
    if fix.seed_key.startswith(f"{slug}#"):
        return fix.seed_key[len(slug) + 1:]
    return fix.seed_key


def _stamp_fix_keys(fixes: list[Fix], slugs: dict[int, str]) -> None:
    """A fix people added gets a seed key at its first export ("<slug>#local-<id>"), so
    the pack names it the same every time and importing it back finds it."""
    for fix in fixes:
        if not fix.seed_key:
            fix.seed_key = f"{slugs[fix.incident_id]}#local-{fix.id}"


def _outcome_record(outcome: FixOutcome) -> dict[str, Any]:
    record: dict[str, Any] = {"worked": bool(outcome.worked)}
    for name in ("note", "engine", "engine_version", "model_arch", "gpu", "reporter"):
        if getattr(outcome, name):
            record[name] = getattr(outcome, name)
    record["at"] = outcome.created_at.astimezone(UTC).isoformat()
    return record


def _incident_record(repo: Repository, incident: Incident, fixes: list[Fix],
                     outcomes: dict[int, list[FixOutcome]], seed_examples: dict[str, list[tuple[str, str]]],
                     slugs: dict[int, str]) -> dict[str, Any]:
    slug = incident.slug or ""
    nxt = repo.live_incident_id(incident.next_incident_id) if incident.next_incident_id else None
    examples = seed_examples.get(slug) if incident.seeded else None
    if not examples:
        examples = [(f"occurrence-{oid}", _clip_log(decompress_log(blob).decode("utf-8", "replace")))
                    for oid, _, blob in pack_queries.example_logs(repo.s, incident.id,
                                                                  EXAMPLES_PER_INCIDENT)]
    record: dict[str, Any] = {
        "slug": slug, "title": incident.title, "engine": incident.engine or "other",
        "affected_versions": incident.affected_versions, "fixed_in": incident.fixed_in,
        "model_archs": list(incident.model_archs or []),
        "gpu_families": list(incident.gpu_families or []), "phase": incident.phase,
        "engine_limitation": bool(incident.engine_limitation), "summary": incident.summary,
        "next": slugs.get(nxt) if nxt else None, "links": list(incident.links or []),
        "tags": list(incident.tags or []), "recommendation": incident.recommended_path,
        "notes": incident.notes,
        "examples": [{"name": name, "log": text} for name, text in examples],
        "fixes": [],
    }
    for fix in fixes:
        entry: dict[str, Any] = {
            "key": _fix_key(fix, slug), "title": fix.title, "kind": fix.kind,
            "description": fix.description, "change": dict(fix.change or {}),
            "applies_to": dict(fix.applies_to or {}), "worked": fix.curated_worked,
            "failed": fix.curated_failed}
        if fix.author:
            entry["author"] = fix.author
        entry["outcomes"] = [_outcome_record(o) for o in outcomes.get(fix.id, [])]
        record["fixes"].append(entry)
    return record


class _PackDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Block style for text with line breaks (logs, summaries, diffs), as seeds are written."""


def _str(dumper: Any, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_PackDumper.add_representer(str, _str)


def dump_record(record: dict[str, Any]) -> str:
    return yaml.dump(record, Dumper=_PackDumper, sort_keys=False, allow_unicode=True, width=100)


def export_pack(db: Database, incident_ids: list[int] | None = None,
                seeds_dir: Path | None = None) -> list[tuple[str, str]]:
    """(relative path, YAML text) of each exported incident: all live incidents, or
    those of `incident_ids` (NotFound for an unknown id). Stamps a slug on
    each incident that has none (one write transaction), so the export is stable."""
    seed_examples: dict[str, list[tuple[str, str]]] = {}
    if seeds_dir is not None and seeds_dir.is_dir():
        seeds, _ = read_seeds(seeds_dir)
        seed_examples = {s.slug: s.examples for s in seeds}
    with db.write() as session:
        repo = Repository(session)
        _serialise(repo)
        incidents = pack_queries.live_incidents(session, incident_ids)
        if incident_ids is not None:
            missing = sorted(set(incident_ids) - {i.id for i in incidents})
            if missing:
                raise NotFound(f"incidents: no live incident {', '.join(f'#{n}' for n in missing)} "
                               "(merged ones are exported with the incident they went into)")
        # the incidents a chain names need a slug too, exported or not
        linked = [repo.incident(repo.live_incident_id(i.next_incident_id))
                  for i in incidents if i.next_incident_id]
        _assign_slugs(repo, incidents + [i for i in linked if i is not None])
        session.flush()
        slugs = {i.id: i.slug for i in incidents + [i for i in linked if i is not None]}
        fixes_by_incident: dict[int, list[Fix]] = {}
        fixes = repo.fixes_of([i.id for i in incidents])
        _stamp_fix_keys(fixes, slugs)  # type: ignore[arg-type]
        session.flush()
        for fix in fixes:
            fixes_by_incident.setdefault(fix.incident_id, []).append(fix)
        outcomes = pack_queries.outcomes_of(session, [f.id for fs in fixes_by_incident.values() for f in fs])
        records = [_incident_record(repo, incident, fixes_by_incident.get(incident.id, []),
                                    outcomes, seed_examples, slugs)  # type: ignore[arg-type]
                   for incident in incidents]
    # written after the transaction: YAML costs more than the reads, and holds no lock
    return [(f"{record['engine']}/{record['slug']}.yaml", dump_record(record)) for record in records]


def write_pack(files: list[tuple[str, str]], out_dir: Path) -> None:
    for name, text in files:
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def pack_archive(files: list[tuple[str, str]]) -> bytes:
    """The pack as a tar.gz of its YAML files (what GET /export answers)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files:
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(datetime.now(UTC).timestamp())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# ---- reading a pack ------------------------------------------------------------------------


def _is_pack_file(name: str) -> bool:
    path = PurePosixPath(name)
    return path.suffix in (".yaml", ".yml") and not any(p.startswith(".") for p in path.parts)


def read_archive(data: bytes, max_bytes: int) -> list[tuple[str, bytes]]:
    """The YAML members of a tar(.gz) or zip pack, read in memory (nothing is extracted
    to disk); refused when it is neither, or inflates beyond `max_bytes`."""
    members: list[tuple[str, bytes]] = []
    total = 0

    def take(name: str, size: int, read: Any) -> None:
        nonlocal total
        if not _is_pack_file(name):
            return
        total += size
        if total > max_bytes or len(members) >= MAX_PACK_FILES:
            raise InvalidInput(f"the pack unpacks to more than {max_bytes // (1024 * 1024)} MB "
                               f"or {MAX_PACK_FILES} files", field="pack")
        members.append((name, read()))

    if data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        take(info.filename, info.file_size, lambda i=info: archive.read(i)[: max_bytes + 1])
        except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
            raise InvalidInput(f"pack: not a readable zip file ({exc})", field="pack") from None
    else:
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
                for info in archive:
                    if info.isfile():
                        handle = archive.extractfile(info)
                        take(info.name, info.size, lambda h=handle: h.read(max_bytes + 1) if h else b"")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise InvalidInput(f"pack: not a tar.gz or zip of seed YAML files ({exc})",
                               field="pack") from None
    if not members:
        raise InvalidInput("pack: holds no .yaml file", field="pack")
    return members


def read_folder(root: Path) -> list[tuple[str, bytes]]:
    if root.is_file():
        data = root.read_bytes()
        if root.suffix in (".yaml", ".yml"):
            return [(root.name, data)]
        return read_archive(data, 1 << 31)
    if not root.is_dir():
        raise InvalidInput(f"{root}: no such folder or pack file", field="path")
    files = sorted(p for p in root.rglob("*") if p.is_file()
                   and _is_pack_file(p.relative_to(root).as_posix()))
    if not files:
        raise InvalidInput(f"{root}: holds no .yaml file", field="path")
    return [(p.relative_to(root).as_posix(), p.read_bytes()) for p in files]


@dataclass(slots=True)
class PackOutcome:
    worked: bool
    at: datetime
    note: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    model_arch: str | None = None
    gpu: str | None = None
    reporter: str | None = None

    def identity(self) -> tuple[Any, ...]:
        return (self.worked, self.at.astimezone(UTC).isoformat(), self.note, self.engine,
                self.engine_version, self.model_arch, self.gpu, self.reporter)


@dataclass(slots=True)
class PackEntry:
    """One incident of a pack: the seed, and what the pack adds to the seed schema."""

    name: str
    seed: Seed
    present: set[str]  # the top-level keys the file holds
    notes: str | None
    fix_present: dict[str, set[str]]
    authors: dict[str, str | None]
    outcomes: dict[str, list[PackOutcome]]


def _clean(value: Any, size: int) -> str | None:
    """What another team's people typed (notes, outcomes, authors), with its secrets masked
    as an upload's fields are; blank is none. Curated text (summaries, fix descriptions)
    is stored as written, as `kb seed` stores it."""
    if value is None or not str(value).strip():
        return None
    return redact_field(str(value))[:size]


def _outcomes(raw: Any, where: str) -> list[PackOutcome]:
    if raw in (None, []):
        return []
    if not isinstance(raw, list):
        raise InvalidInput(f"{where}: must be a list", field=where)
    out = []
    for n, item in enumerate(raw):
        field_ = f"{where}[{n}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{field_}: must be a mapping", field=field_)
        unknown = set(item) - set(OUTCOME_KEYS)
        if unknown:
            raise InvalidInput(f"{field_}.{sorted(unknown)[0]}: not a key of an outcome "
                               f"({', '.join(OUTCOME_KEYS)})", field=f"{field_}.{sorted(unknown)[0]}")
        if not isinstance(item.get("worked"), bool):
            raise InvalidInput(f"{field_}.worked: must be true or false", field=f"{field_}.worked")
        at = item.get("at")
        try:
            when = at if isinstance(at, datetime) else datetime.fromisoformat(str(at))
        except ValueError:
            raise InvalidInput(f"{field_}.at: {at!r} is not an ISO 8601 time", field=f"{field_}.at") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        out.append(PackOutcome(
            worked=item["worked"], at=when, note=_clean(item.get("note"), 4000),
            engine=_clean(item.get("engine"), 40), engine_version=_clean(item.get("engine_version"), 60),
            model_arch=_clean(item.get("model_arch"), 120), gpu=_clean(item.get("gpu"), 120),
            reporter=_clean(item.get("reporter"), 200)))
    return out


def parse_pack(files: list[tuple[str, bytes]]) -> list[PackEntry]:
    """Every file checked before anything is written; the first bad one is refused
    naming the file and the field (InvalidInput, a 400)."""
    entries: list[PackEntry] = []
    slugs: dict[str, str] = {}
    for name, raw in files:
        try:
            seed = parse_seed(Path(name), raw)
        except SeedError as exc:
            message = str(exc)
            # "vllm/x.yaml (x): fixes[0].change.version: ..." -> the field after the file
            match = re.search(r"\): ([\w\[\].]+)", message) or re.search(r"^[^:]+: (slug) ", message)
            raise InvalidInput(message, field=match.group(1) if match else None) from None
        if seed.slug in slugs:
            raise InvalidInput(f"{name} ({seed.slug}): slug already used by {slugs[seed.slug]}",
                               field="slug")
        slugs[seed.slug] = name
        data = load_yaml(raw)
        where = f"{name} ({seed.slug})"
        notes = data.get("notes")
        if notes is not None and not isinstance(notes, str):
            raise InvalidInput(f"{where}: notes must be text", field="notes")
        fix_present: dict[str, set[str]] = {}
        authors: dict[str, str | None] = {}
        outcomes: dict[str, list[PackOutcome]] = {}
        for n, (raw_fix, seed_fix) in enumerate(zip(data.get("fixes") or [], seed.fixes, strict=True)):
            try:
                outcomes[seed_fix.key] = _outcomes(raw_fix.get("outcomes"), f"fixes[{n}].outcomes")
            except InvalidInput as exc:
                raise InvalidInput(f"{where}: {exc.detail}", field=exc.field) from None
            fix_present[seed_fix.key] = set(raw_fix)
            authors[seed_fix.key] = _clean(raw_fix.get("author"), 200)
        entries.append(PackEntry(name=name, seed=seed, present=set(data),
                                 notes=_clean(notes, 20000) if notes else None,
                                 fix_present=fix_present, authors=authors, outcomes=outcomes))
    return entries


# ---- import ------------------------------------------------------------------------------


def _pack_incident_values(entry: PackEntry) -> dict[str, Any]:
    seed = entry.seed
    values = {
        "title": seed.title[:500], "engine": seed.engine, "affected_versions": seed.affected_versions,
        "fixed_in": seed.fixed_in, "model_archs": seed.model_archs, "gpu_families": seed.gpu_families,
        "phase": seed.phase, "engine_limitation": seed.engine_limitation,
        "summary": seed.summary or None,
        "links": seed.links, "tags": [t.lower() for t in seed.tags], "notes": entry.notes,
    }
    return {column: values[key] for key, column in INCIDENT_FIELDS.items()
            if key in entry.present or key == "title"}


def _differing(obj: Any, values: dict[str, Any]) -> list[str]:
    return [name for name, value in values.items() if getattr(obj, name) != value]


# The columns a report names as the pack does.
SHOWN_AS = {"curated_worked": "worked", "curated_failed": "failed", "next_incident_id": "next"}


def _conflict_or_apply(obj: Any, values: dict[str, Any], differing: list[str], editable: tuple[str, ...],
                       overwrite: bool, report: ImportReport, slug: str, fix: str | None) -> list[str]:
    """Apply `values` that differ; a field a person edited here is kept (reported) unless
    `overwrite`. Returns the fields changed, named as the pack names them."""
    edited = [name for name in differing if obj.edited_at is not None and name in editable]
    if edited:
        report.conflicts.append(PackConflict(slug=slug, fix=fix, fields=[SHOWN_AS.get(n, n) for n in edited],
                                             edited_at=obj.edited_at, overwritten=overwrite))
        if overwrite:
            obj.edited_at = None  # the pack's version now stands, as if never edited
    changed = []
    for name in differing:
        if name in edited and not overwrite:
            continue
        setattr(obj, name, values[name])
        changed.append(SHOWN_AS.get(name, name))
    return changed


def _import_incident(repo: Repository, entry: PackEntry, prints: list[ExamplePrint],
                     overwrite: bool, report: ImportReport) -> Incident:
    seed, now = entry.seed, utcnow()
    values = _pack_incident_values(entry)
    incident = repo.incident_by_slug(seed.slug)
    if incident is None:
        first = prints[0] if prints else None
        incident = repo.add_incident(
            slug=seed.slug, seeded=False, occurrence_count=0, created_at=now, updated_at=now,
            recommended_path="investigate",
            fingerprint_hash=first.hash if first else None,
            fingerprint_version=first.version if first else None,
            signature=first.signature if first else None,
            exception=(first.features.exception[:300] or None) if first else None,
            **{k: v for k, v in values.items()})
        report.added.append(PackChange(slug=seed.slug, fields=sorted(values)))
        changed = list(values)
    else:
        differing = _differing(incident, values)
        changed = _conflict_or_apply(incident, values, differing, tuple(INCIDENT_FIELDS.values()),
                                     overwrite, report, seed.slug, None)
        if changed:
            incident.updated_at = now
            report.changed.append(PackChange(slug=seed.slug, fields=changed))
    if "model_archs" in changed or "gpu_families" in changed:
        repo.add_facets(incident.id, [("model_arch", a) for a in incident.model_archs or []]
                        + [("gpu_family", g) for g in incident.gpu_families or []])
    if "tags" in changed:
        repo.replace_facets(incident.id, "tag", incident.tags or [])
    return incident


def _import_fixes(repo: Repository, incident: Incident, entry: PackEntry, overwrite: bool,
                  report: ImportReport) -> None:
    slug, now = entry.seed.slug, utcnow()
    for sf in entry.seed.fixes:
        key = f"{slug}#{sf.key}"
        present = entry.fix_present.get(sf.key, set())
        values = {"title": sf.title[:500], "kind": sf.kind,
                  "description": sf.description or None,  # curated text, as `kb seed` stores it
                  "change": sf.change, "applies_to": sf.applies_to,
                  "curated_worked": sf.worked, "curated_failed": sf.failed,
                  "author": entry.authors.get(sf.key)}
        values = {column: values[column] for name, column in FIX_FIELDS.items()
                  if name in present or name in ("title", "kind")}
        fix = repo.fix_by_seed_key(key)
        if fix is None and "#" in sf.key:  # a fix a merge brought from another incident
            fix = repo.fix_by_seed_key(sf.key)
        if fix is None:
            values.setdefault("curated_worked", 0)
            values.setdefault("curated_failed", 0)
            values.setdefault("change", {})
            values.setdefault("applies_to", {})
            fix = Fix(incident_id=incident.id, seeded=False, seed_key=key, created_at=now,
                      updated_at=now, **values)
            repo.s.add(fix)
            repo.s.flush()
            report.fixes_added.append(PackChange(slug=slug, fix=key, fields=sorted(values)))
        else:
            differing = _differing(fix, values)
            changed = _conflict_or_apply(fix, values, differing, EDITABLE_FIX_FIELDS, overwrite,
                                         report, slug, key)
            if changed:
                fix.updated_at = now
                report.fixes_changed.append(PackChange(slug=slug, fix=key, fields=changed))
        known = {_stored_identity(o) for o in pack_queries.outcomes_of(repo.s, [fix.id]).get(fix.id, [])}
        for outcome in entry.outcomes.get(sf.key, []):
            if outcome.identity() in known:
                continue
            known.add(outcome.identity())
            repo.s.add(FixOutcome(fix_id=fix.id, worked=outcome.worked, note=outcome.note,
                                  engine=outcome.engine, engine_version=outcome.engine_version,
                                  model_arch=outcome.model_arch, gpu=outcome.gpu,
                                  reporter=outcome.reporter, created_at=outcome.at))
            report.outcomes_added += 1
    repo.s.flush()


def _stored_identity(o: FixOutcome) -> tuple[Any, ...]:
    return (bool(o.worked), o.created_at.astimezone(UTC).isoformat(), o.note, o.engine,
            o.engine_version, o.model_arch, o.gpu, o.reporter)


def _import_fingerprints(repo: Repository, incident: Incident, entry: PackEntry,
                         prints: list[ExamplePrint], report: ImportReport) -> None:
    owner_id = repo.live_incident_id(incident.id)
    for p in prints:
        row = repo.fingerprint_by_route(p.route_key)
        if row is None:
            repo.add_fingerprint(owner_id, p.version, p.hash, p.route_key, p.features, "pack")
            report.fingerprints_added += 1
        elif repo.live_incident_id(row.incident_id) != owner_id:
            report.warnings.append(f"{entry.seed.slug}: example {p.name!r} is the crash of incident "
                                   f"#{repo.live_incident_id(row.incident_id)} here; it stays there "
                                   "(merge the two to join them)")


def _import_next(repo: Repository, incident: Incident, entry: PackEntry, overwrite: bool,
                 report: ImportReport) -> bool:
    if "next" not in entry.present:
        return False
    slug = entry.seed.slug
    target_id = None
    if entry.seed.next:
        target = repo.incident_by_slug(entry.seed.next)
        if target is None:
            report.warnings.append(f"{slug}: next {entry.seed.next!r} is neither in the pack nor here")
            return False
        target_id = repo.live_incident_id(target.id)
    if incident.next_incident_id == target_id or target_id == incident.id:
        return False
    changed = _conflict_or_apply(incident, {"next_incident_id": target_id}, ["next_incident_id"],
                                 ("next_incident_id",), overwrite, report, slug, None)
    if changed:
        incident.updated_at = utcnow()
        known = next((c for c in report.changed + report.added if c.slug == slug), None)
        if known is None:
            report.changed.append(PackChange(slug=slug, fields=["next"]))
        elif "next" not in known.fields:
            known.fields.append("next")
    return bool(changed)


@dataclass(slots=True)
class PreparedPack:
    """A checked pack and its examples' fingerprints: the CPU work, done before the
    transaction (the service runs it outside the database deadline)."""

    entries: list[PackEntry]
    prints: dict[str, list[ExamplePrint]]


def prepare_pack(files: list[tuple[str, bytes]]) -> PreparedPack:
    entries = parse_pack(files)
    return PreparedPack(entries, {e.seed.slug: fingerprint_examples(e.seed) for e in entries})


def import_pack(db: Database, files: list[tuple[str, bytes]], *, overwrite: bool = False) -> ImportReport:
    """Merge a pack into the knowledge base (see the module doc), in one transaction."""
    return apply_pack(db, prepare_pack(files), overwrite=overwrite)


def apply_pack(db: Database, prepared: PreparedPack, *, overwrite: bool = False) -> ImportReport:
    entries, prints = prepared.entries, prepared.prints
    report = ImportReport(files=len(entries))
    with db.write() as session:
        repo = Repository(session)
        _serialise(repo)
        incidents: dict[str, Incident] = {}
        touched: set[str] = set()

        def progress() -> tuple[int, ...]:
            return (len(report.added), len(report.changed), len(report.fixes_added),
                    len(report.fixes_changed), report.outcomes_added, report.fingerprints_added)

        for entry in entries:
            before = progress()
            incident = _import_incident(repo, entry, prints[entry.seed.slug], overwrite, report)
            incidents[entry.seed.slug] = incident
            session.flush()
            _import_fixes(repo, incident, entry, overwrite, report)
            _import_fingerprints(repo, incident, entry, prints[entry.seed.slug], report)
            if progress() != before:
                touched.add(entry.seed.slug)
        session.flush()
        for entry in entries:  # chains once every incident of the pack exists
            if _import_next(repo, incidents[entry.seed.slug], entry, overwrite, report):
                touched.add(entry.seed.slug)
        report.unchanged = len(entries) - len(touched)
        session.flush()
        for incident in incidents.values():
            if incident.merged_into_id is None:
                refresh_recommended_path(repo, incident)
    return report


__all__ = ["ImportReport", "PackConflict", "PackChange", "PreparedPack", "apply_pack", "export_pack",
           "import_pack", "pack_archive", "parse_pack", "prepare_pack", "read_archive", "read_folder", "slug_for", "write_pack"]
