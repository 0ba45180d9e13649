"""Queries, and nothing else: no matching policy, no HTTP. Services call these inside
one transaction (kb.db.session.Database.read/write) and decide what to do with the rows.
Candidate loading for fuzzy matching lives here because it must use indexed columns;
the scoring of the candidates lives in kb.core.match."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    Select,
    Update,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from kb.core.recall import RecallKeys, TermWeights, message_key, terms
from kb.core.records import CrashFeatures
from kb.db import logsearch
from kb.db.models import (
    Fix,
    FixOutcome,
    Incident,
    IncidentFacet,
    IncidentFingerprint,
    IncidentMerge,
    Occurrence,
    TemplateTerm,
    UTCDateTime,
)

def _clip(value: str | None, size: int) -> str | None:
    return value[:size] if value else value


@dataclass(slots=True)
class Candidate:
    incident_id: int
    fingerprint_id: int
    features: CrashFeatures


_FEATURE_COLUMNS = (
    IncidentFingerprint.incident_id,
    IncidentFingerprint.id,
    IncidentFingerprint.exception,
    IncidentFingerprint.message_template,
    IncidentFingerprint.frames,
    IncidentFingerprint.engine,
    IncidentFingerprint.engine_version,
    IncidentFingerprint.model_arch,
    IncidentFingerprint.gpu_name,
    IncidentFingerprint.gpu_count,
    IncidentFingerprint.tp,
    IncidentFingerprint.dp,
    IncidentFingerprint.pp,
    IncidentFingerprint.ep,
    IncidentFingerprint.phase,
)


def _candidate(row: Sequence[Any]) -> Candidate:
    (incident_id, fp_id, exc, template, frames, engine, version, arch, gpu, count,
     tp, dp, pp, ep, phase) = row
    return Candidate(incident_id, fp_id, CrashFeatures(
        exception=exc, message_template=template, frames=list(frames or []), engine=engine,
        engine_version=version, model_arch=arch, gpu_name=gpu, gpu_count=count, tp=tp, dp=dp,
        pp=pp, ep=ep, phase=phase))


def facet_values(pairs: Iterable[tuple[str, str | None]]) -> set[tuple[str, str]]:
    """(kind, value) facets as stored: blanks dropped, values lowercased and clipped."""
    return {(k, str(v).strip().lower()[:200]) for k, v in pairs if v and str(v).strip()}


@dataclass(slots=True)
class IncidentHead:
    """What an upload's answer and its advice need of the incident it lands on, read by
    the statement that finds the incident (no second query for the whole row)."""

    id: int
    title: str
    slug: str | None
    engine: str | None
    engine_limitation: bool
    next_incident_id: int | None
    occurrence_count: int
    first_seen: datetime | None
    last_seen: datetime | None
    fix_count: int
    facets: set[tuple[str, str]]


# The upload path runs these on every upload: built once, so each execution skips
# statement construction and reuses SQLAlchemy's memoized cache key.
_FACET_SEPARATOR, _KIND_SEPARATOR = "\x1e", "\x1f"
HEAD_COLUMNS = (
    Incident.id, Incident.title, Incident.slug, Incident.engine, Incident.engine_limitation,
    Incident.next_incident_id, Incident.occurrence_count, Incident.first_seen,
    Incident.last_seen,
    select(func.count(Fix.id)).where(Fix.incident_id == Incident.id).scalar_subquery()
    .label("fix_count"),
    select(func.aggregate_strings(IncidentFacet.kind + _KIND_SEPARATOR + IncidentFacet.value,
                                  _FACET_SEPARATOR))
    .where(IncidentFacet.incident_id == Incident.id).scalar_subquery().label("facets"),
)
_SEEN_AT = bindparam("seen_at", type_=UTCDateTime())


def routed(*columns: Any) -> Select[Any]:
    """`columns` of the incident the route key :route_key leads to."""
    return (select(*columns)
            .join(IncidentFingerprint, IncidentFingerprint.incident_id == Incident.id)
            .where(IncidentFingerprint.route_key == bindparam("route_key")))


def counting(which: Any) -> Update:
    """Count one more occurrence, seen at :seen_at, of the incident `which` selects, in
    one statement (no read-modify-write race), returning the counters as stored."""
    return (update(Incident).where(which)
            .values(occurrence_count=Incident.occurrence_count + 1, last_seen=_SEEN_AT,
                    first_seen=func.coalesce(Incident.first_seen, _SEEN_AT))
            .returning(Incident.occurrence_count, Incident.first_seen, Incident.last_seen))


_HEAD_BY_ROUTE = routed(Incident.merged_into_id, *HEAD_COLUMNS)
_HEAD_BY_ID = select(*HEAD_COLUMNS).where(Incident.id == bindparam("incident_id"))
_COUNT_OCCURRENCE = counting(Incident.id == bindparam("incident_id"))
_ADD_OCCURRENCE = insert(Occurrence).returning(Occurrence.id)


def _like_literal(text: str) -> str:
    """User text inside a LIKE pattern, its wildcards taken literally (escape: backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _has_occurrences() -> Any:
    return exists().where(Occurrence.incident_id == Incident.id)


def _needs_triage() -> Any:
    """Uploaded here and never identified: every fingerprint it has was stored by an
    upload whose analysis did not capture the cause (kb.services.ingest stores those
    with an empty exception: wrapper-only logs, logs without an error)."""
    identified = exists().where(IncidentFingerprint.incident_id == Incident.id,
                                IncidentFingerprint.exception != "")
    return and_(Incident.seeded.is_(False), _has_occurrences(), ~identified)


# The list's views (GET /incidents?view=): what a team looks at first.
_VIEWS = {
    "seen_here": _has_occurrences,  # uploaded here at least once
    "seeded": lambda: and_(Incident.seeded.is_(True), ~_has_occurrences()),  # curated, not seen here
    "needs_triage": _needs_triage,
}
VIEWS = tuple(_VIEWS)


_ADD_FACETS = {
    "postgresql": postgresql.insert(IncidentFacet).on_conflict_do_nothing(),
    "sqlite": sqlite.insert(IncidentFacet).on_conflict_do_nothing(),
}
_FIXES_OF = (select(Fix).where(Fix.incident_id.in_(bindparam("incident_ids", expanding=True)))
             .order_by(Fix.id))
_OUTCOME_COUNTS = (
    select(FixOutcome.fix_id, FixOutcome.worked, FixOutcome.engine_version,
           FixOutcome.model_arch, func.count())
    .where(FixOutcome.fix_id.in_(bindparam("fix_ids", expanding=True)))
    .group_by(FixOutcome.fix_id, FixOutcome.worked, FixOutcome.engine_version,
              FixOutcome.model_arch))


def _candidate_lookups(with_context: bool) -> Select[Any]:
    """The recall lookups of kb.core.recall.RecallKeys as one UNION ALL, each bounded
    (SQLite allows LIMIT only in a subquery): same exception and message key, same
    exception newest first, same message key under another type, and, with_context, same
    engine and phase under another type."""
    fp = IncidentFingerprint
    exception = bindparam("exception")
    queries: list[Select[Any]] = [
        select(*_FEATURE_COLUMNS).where(fp.exception == exception, fp.message_key == bindparam("message_key"))
        .limit(bindparam("by_key")),
        select(*_FEATURE_COLUMNS).where(fp.exception == exception).order_by(fp.id.desc())
        .limit(bindparam("by_exception")),
    ]
    # the same statement under another exception type (a wrapper, another engine's type)
    queries.append(select(*_FEATURE_COLUMNS).where(
        fp.message_key == bindparam("message_key"), fp.exception != exception)
        .order_by(fp.id.desc()).limit(bindparam("by_message")))
    if with_context:
        queries.append(select(*_FEATURE_COLUMNS).where(
            fp.engine == bindparam("engine"), fp.phase == bindparam("phase"), fp.exception != exception)
            .order_by(fp.id.desc()).limit(bindparam("by_context")))
    return union_all(*(q.subquery().select() for q in queries))  # type: ignore[return-value]


_CANDIDATES = _candidate_lookups(with_context=False)
_CANDIDATES_WITH_CONTEXT = _candidate_lookups(with_context=True)
_TERM_COUNTS = (select(TemplateTerm.term, TemplateTerm.templates)
                .where(TemplateTerm.term.in_(bindparam("terms", expanding=True))))


def _counting_terms(dialect: Any) -> Any:
    statement = dialect.insert(TemplateTerm)
    return statement.on_conflict_do_update(
        index_elements=[TemplateTerm.term],
        set_={"templates": TemplateTerm.templates + statement.excluded.templates})


_COUNT_TERMS = {"postgresql": _counting_terms(postgresql), "sqlite": _counting_terms(sqlite)}


def head_from_row(row: Sequence[Any]) -> IncidentHead:
    *columns, facets = row
    pairs = (item.partition(_KIND_SEPARATOR) for item in (facets or "").split(_FACET_SEPARATOR))
    return IncidentHead(*columns, facets={(kind, value) for kind, _, value in pairs if value})


class Repository:
    def __init__(self, session: Session) -> None:
        self.s = session
        self.dialect = session.get_bind().dialect.name

    # ---- fingerprints and matching candidates ------------------------------------

    def head_by_route(self, route_key: str) -> IncidentHead | None:
        """The live incident a fingerprint routes to (one indexed lookup)."""
        row = self.s.connection().execute(_HEAD_BY_ROUTE, {"route_key": route_key}).first()
        if row is None:
            return None
        if row[0] is not None:  # merges move fingerprints: only a merge chain made by hand
            return self.head(self.live_incident_id(row[1]))
        return head_from_row(row[1:])

    def head(self, incident_id: int) -> IncidentHead | None:
        row = self.s.connection().execute(_HEAD_BY_ID, {"incident_id": incident_id}).first()
        return head_from_row(row) if row is not None else None

    def fingerprint_by_route(self, route_key: str) -> IncidentFingerprint | None:
        return self.s.execute(select(IncidentFingerprint).where(
            IncidentFingerprint.route_key == route_key)).scalar_one_or_none()

    def candidates(self, keys: RecallKeys, limit: int) -> list[Candidate]:
        """Stored fingerprints worth scoring, through the indexed lookups of `keys` in one
        round trip, each bounded (kb.core.recall.RecallKeys). Never a scan of all incidents."""
        statement = _CANDIDATES_WITH_CONTEXT if keys.engine and keys.phase else _CANDIDATES
        params = {"exception": keys.exception, "message_key": keys.message_key,
                  "engine": keys.engine, "phase": keys.phase, "by_key": max(1, limit // 2),
                  "by_exception": max(1, limit // 5), "by_message": max(1, limit // 10),
                  "by_context": max(1, limit // 10)}
        seen: set[int] = set()
        out: list[Candidate] = []
        for row in self.s.connection().execute(statement, params):  # Core rows: no ORM overhead
            if row[1] not in seen:
                seen.add(row[1])
                out.append(_candidate(row))
        return out

    def term_weights(self, wanted: Iterable[str]) -> TermWeights:
        """The document frequencies of `wanted` terms and the number of stored templates."""
        keys = sorted({t[:120] for t in wanted} | {""})
        rows = self.s.connection().execute(_TERM_COUNTS, {"terms": keys}).all()
        counts = {term: count for term, count in rows}
        return TermWeights(counts.pop("", 0), counts)

    def _count_terms(self, template: str, step: int) -> None:
        """Add `step` (1 or -1) to the counts of a template's terms and of templates.
        Rows are written in term order, so concurrent uploads lock them in one order."""
        rows = [{"term": t, "templates": step} for t in sorted({t[:120] for t in terms(template)} | {""})]
        self.s.connection().execute(_COUNT_TERMS[self.dialect], rows)

    def add_fingerprint(self, incident_id: int, version: str, hash_: str, route_key: str,
                        features: CrashFeatures, source: str) -> IncidentFingerprint:
        row = IncidentFingerprint(
            incident_id=incident_id, version=version, hash=hash_, route_key=route_key,
            source=source,
            exception=features.exception[:300], message_key=message_key(features.message_template),
            message_template=features.message_template, frames=list(features.frames),
            engine=_clip(features.engine, 40), engine_version=_clip(features.engine_version, 60),
            model_arch=_clip(features.model_arch, 120), gpu_name=_clip(features.gpu_name, 120),
            gpu_count=features.gpu_count, tp=features.tp, dp=features.dp, pp=features.pp,
            ep=features.ep, phase=_clip(features.phase, 40))
        self.s.add(row)
        self.s.flush()
        if features.message_template:
            self._count_terms(features.message_template, 1)
        return row

    def remove_fingerprint(self, row: IncidentFingerprint) -> None:
        self.s.execute(delete(IncidentFingerprint).where(IncidentFingerprint.id == row.id))
        if row.message_template:
            self._count_terms(row.message_template, -1)

    def fingerprints_of(self, incident_id: int) -> list[IncidentFingerprint]:
        return list(self.s.execute(select(IncidentFingerprint).where(
            IncidentFingerprint.incident_id == incident_id).order_by(IncidentFingerprint.id)
        ).scalars())

    # ---- incidents -----------------------------------------------------------------

    def incident(self, incident_id: int, *, lock: bool = False) -> Incident | None:
        if not lock:
            return self.s.get(Incident, incident_id)  # the identity map saves a query
        query = select(Incident).where(Incident.id == incident_id)
        if self.dialect == "postgresql":
            query = query.with_for_update()
        return self.s.execute(query).scalar_one_or_none()

    def incident_by_slug(self, slug: str) -> Incident | None:
        return self.s.execute(select(Incident).where(Incident.slug == slug)).scalar_one_or_none()

    def live_incident_id(self, incident_id: int) -> int:
        """Follow merges to the incident that absorbed this one."""
        seen = {incident_id}
        current = incident_id
        while True:
            target = self.s.execute(select(Incident.merged_into_id).where(
                Incident.id == current)).scalar_one_or_none()
            if target is None or target in seen:
                return current
            seen.add(target)
            current = target

    def add_incident(self, **values: Any) -> Incident:
        incident = Incident(**values)
        self.s.add(incident)
        self.s.flush()
        return incident

    def count_occurrence(self, head: IncidentHead, when: datetime) -> None:
        """Count one more occurrence (`counting`) and put the stored counters on `head`.
        Uploads run it last before committing: it locks the incident's row until then."""
        row = self.s.connection().execute(
            _COUNT_OCCURRENCE, {"incident_id": head.id, "seen_at": when}).one()
        head.occurrence_count, head.first_seen, head.last_seen = row

    def titles(self, ids: Iterable[int]) -> dict[int, tuple[str, bool]]:
        ids = list(set(ids))
        if not ids:
            return {}
        rows = self.s.execute(select(Incident.id, Incident.title, Incident.engine_limitation)
                              .where(Incident.id.in_(ids)))
        return {r[0]: (r[1], r[2]) for r in rows}

    def seeded_among(self, ids: Iterable[int]) -> set[int]:
        ids = list(set(ids))
        if not ids:
            return set()
        return set(self.s.execute(select(Incident.id).where(
            Incident.id.in_(ids), Incident.seeded.is_(True))).scalars())

    def live_ids(self, ids: Iterable[int]) -> set[int]:
        ids = list(set(ids))
        if not ids:
            return set()
        return set(self.s.execute(select(Incident.id).where(
            Incident.id.in_(ids), Incident.merged_into_id.is_(None))).scalars())

    def chain(self, incident_id: int, next_incident_id: int | None, max_hops: int = 10
              ) -> list[Incident]:
        """The incidents known to follow this one once it is fixed, in order."""
        out: list[Incident] = []
        seen = {incident_id}
        while next_incident_id is not None and len(out) < max_hops:
            nxt_id = self.live_incident_id(next_incident_id)
            if nxt_id in seen:
                break
            seen.add(nxt_id)
            current = self.s.get(Incident, nxt_id)
            if current is None:
                break
            out.append(current)
            next_incident_id = current.next_incident_id
        return out

    def previous(self, incident_id: int) -> list[Incident]:
        return list(self.s.execute(select(Incident).where(
            Incident.next_incident_id == incident_id, Incident.merged_into_id.is_(None))
            .order_by(Incident.id)).scalars())

    def seeded_incidents(self) -> list[Incident]:
        return list(self.s.execute(select(Incident).where(Incident.seeded.is_(True))).scalars())

    def count_incidents(self) -> int:
        return self.s.execute(select(func.count()).select_from(Incident)).scalar_one()

    # ---- facets --------------------------------------------------------------------

    def add_facets(self, incident_id: int, pairs: Iterable[tuple[str, str | None]]) -> None:
        rows = [{"incident_id": incident_id, "kind": k, "value": v} for k, v in facet_values(pairs)]
        if rows:  # one multi-row statement, one round trip
            self.s.connection().execute(_ADD_FACETS[self.dialect], rows)

    def replace_facets(self, incident_id: int, kind: str, values: Iterable[str]) -> None:
        wanted = {value for _, value in facet_values((kind, v) for v in values)}
        current = set(self.s.execute(select(IncidentFacet.value).where(
            IncidentFacet.incident_id == incident_id, IncidentFacet.kind == kind)).scalars())
        if current - wanted:
            self.s.execute(delete(IncidentFacet).where(
                IncidentFacet.incident_id == incident_id, IncidentFacet.kind == kind,
                IncidentFacet.value.in_(current - wanted)))
        self.add_facets(incident_id, [(kind, v) for v in wanted - current])

    def facets_of(self, incident_ids: Iterable[int], kinds: Iterable[str]
                  ) -> list[tuple[int, str, str]]:
        """(incident_id, kind, value) of these incidents, values sorted."""
        ids = list(set(incident_ids))
        if not ids:
            return []
        rows = self.s.execute(
            select(IncidentFacet.incident_id, IncidentFacet.kind, IncidentFacet.value)
            .where(IncidentFacet.incident_id.in_(ids), IncidentFacet.kind.in_(list(kinds)))
            .order_by(IncidentFacet.value))
        return [(r[0], r[1], r[2]) for r in rows]

    def move_facets(self, source_id: int, target_id: int) -> None:
        pairs = self.s.execute(select(IncidentFacet.kind, IncidentFacet.value).where(
            IncidentFacet.incident_id == source_id)).all()
        self.add_facets(target_id, [(k, v) for k, v in pairs])

    # ---- occurrences ---------------------------------------------------------------

    def add_occurrence(self, values: dict[str, Any]) -> int:
        """Insert one occurrence (a Core insert: the log never enters the ORM)."""
        values = logsearch.with_search_vector(self.dialect, values)
        return self.s.connection().execute(_ADD_OCCURRENCE, values).scalar_one()

    def occurrences_of(self, incident_id: int, limit: int = 50) -> list[Occurrence]:
        # Load the context columns only: the analysis and the log stay on disk.
        cols = [c for c in Occurrence.__table__.columns
                if c.name not in {"analysis", "log_compressed", "search_text", "search_vector"}]
        rows = self.s.execute(select(*cols).where(Occurrence.incident_id == incident_id)
                              .order_by(Occurrence.created_at.desc(), Occurrence.id.desc())
                              .limit(limit)).mappings().all()
        return [Occurrence(**dict(r)) for r in rows]

    def occurrence_by_idempotency_key(self, key: str) -> Occurrence | None:
        """The occurrence an earlier upload with this Idempotency-Key stored (unique
        index), with its analysis but without the log."""
        cols = [c for c in Occurrence.__table__.columns
                if c.name not in {"log_compressed", "search_text", "search_vector"}]
        row = self.s.execute(select(*cols).where(Occurrence.idempotency_key == key)
                             ).mappings().first()
        return Occurrence(**dict(row)) if row is not None else None

    def latest_analysis(self, incident_id: int) -> dict[str, Any] | None:
        """The stored analysis of the incident's newest occurrence."""
        return self.s.execute(
            select(Occurrence.analysis).where(Occurrence.incident_id == incident_id)
            .order_by(Occurrence.created_at.desc(), Occurrence.id.desc()).limit(1)
        ).scalar_one_or_none()

    def daily_occurrences(self, incident_ids: Iterable[int], since: datetime
                          ) -> list[tuple[int, date, int]]:
        """(incident_id, UTC day, count) of occurrences since `since`: one grouped query
        on the (incident_id, created_at) index."""
        ids = list(set(incident_ids))
        if not ids:
            return []
        created = Occurrence.created_at
        if self.dialect == "postgresql":  # bucket by the UTC day, whatever the session zone
            day = func.date(func.timezone("UTC", created))
        else:
            day = func.date(created)  # SQLite stores UTC
        rows = self.s.execute(
            select(Occurrence.incident_id, day, func.count())
            .where(Occurrence.incident_id.in_(ids), created >= since)
            .group_by(Occurrence.incident_id, day))
        return [(r[0], date.fromisoformat(str(r[1])[:10]), r[2]) for r in rows]

    def occurrence_log(self, occurrence_id: int) -> bytes | None:
        return self.s.execute(select(Occurrence.log_compressed).where(
            Occurrence.id == occurrence_id)).scalar_one_or_none()

    # ---- fixes and outcomes --------------------------------------------------------

    def fix(self, fix_id: int) -> Fix | None:
        return self.s.get(Fix, fix_id)

    def fixes_of(self, incident_ids: Iterable[int]) -> list[Fix]:
        ids = list(set(incident_ids))
        if not ids:
            return []
        return list(self.s.execute(_FIXES_OF, {"incident_ids": ids}).scalars())

    def fix_by_seed_key(self, key: str) -> Fix | None:
        return self.s.execute(select(Fix).where(Fix.seed_key == key)).scalar_one_or_none()

    def outcome_counts(self, fix_ids: Iterable[int]) -> list[tuple[int, bool, str | None, str | None, int]]:
        """(fix_id, worked, engine_version, model_arch, count) groups."""
        ids = list(set(fix_ids))
        if not ids:
            return []
        rows = self.s.connection().execute(_OUTCOME_COUNTS, {"fix_ids": ids})
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def has_outcomes(self, fix_id: int) -> bool:
        return bool(self.s.execute(select(exists().where(FixOutcome.fix_id == fix_id))).scalar())

    # ---- merges --------------------------------------------------------------------

    def move_incident_rows(self, source_id: int, target_id: int) -> dict[str, list[Any]]:
        """Occurrences, fixes and fingerprints of `source` now belong to `target`. Returns
        what moved (ids, and the source's facets), for the merge record."""
        moved: dict[str, list[Any]] = {}
        for name, model in (("occurrences", Occurrence), ("fixes", Fix),
                            ("fingerprints", IncidentFingerprint)):
            moved[name] = list(self.s.scalars(select(model.id).where(model.incident_id == source_id)))
            self.s.execute(update(model).where(model.incident_id == source_id)
                           .values(incident_id=target_id))
        moved["facets"] = [[k, v] for k, v in self.s.execute(
            select(IncidentFacet.kind, IncidentFacet.value).where(IncidentFacet.incident_id == source_id))]
        self.move_facets(source_id, target_id)
        return moved

    def restore_incident_rows(self, moved: dict[str, list[Any]], source_id: int) -> None:
        """The rows a merge moved go back to `source`, wherever later merges took them."""
        for name, model in (("occurrences", Occurrence), ("fixes", Fix),
                            ("fingerprints", IncidentFingerprint)):
            ids = [int(i) for i in moved.get(name) or []]
            for start in range(0, len(ids), 500):
                self.s.execute(update(model).where(model.id.in_(ids[start:start + 500]))
                               .values(incident_id=source_id))
        self.add_facets(source_id, [(k, v) for k, v in moved.get("facets") or []])

    def log_matches(self, terms: Sequence[str], incident_ids: Iterable[int]
                    ) -> dict[int, logsearch.LogMatch]:
        """Log search (kb.db.logsearch): each incident's best matching occurrence and line."""
        return logsearch.best_matches(self.s, terms, incident_ids)

    def occurrence_breakdown(self, incident_id: int) -> dict[str, list[tuple[str | None, int]]]:
        """How many occurrences an incident has per engine version, GPU and model, most
        first: one grouped query per dimension on the incident's own rows."""
        out: dict[str, list[tuple[str | None, int]]] = {}
        for name, col in (("engine_version", Occurrence.engine_version),
                          ("gpu", Occurrence.gpu_name), ("model", Occurrence.model)):
            rows = self.s.execute(select(col, func.count()).where(Occurrence.incident_id == incident_id)
                                  .group_by(col).order_by(func.count().desc(), col))
            out[name] = [(r[0], int(r[1])) for r in rows]
        return out

    def occurrence_span(self, incident_id: int) -> tuple[int, datetime | None, datetime | None]:
        """How many occurrences an incident has, its first and its last."""
        count, first, last = self.s.execute(
            select(func.count(Occurrence.id), func.min(Occurrence.created_at), func.max(Occurrence.created_at))
            .where(Occurrence.incident_id == incident_id)).one()
        return int(count or 0), first, last

    def last_merge(self, source_id: int) -> IncidentMerge | None:
        """The merge that folded `source` away, when it is recorded and not undone."""
        return self.s.scalars(select(IncidentMerge).where(
            IncidentMerge.source_id == source_id, IncidentMerge.undone_at.is_(None))
            .order_by(IncidentMerge.id.desc()).limit(1)).first()

    def merges_of(self, incident_id: int) -> list[IncidentMerge]:
        return list(self.s.scalars(select(IncidentMerge).where(
            or_(IncidentMerge.source_id == incident_id, IncidentMerge.target_id == incident_id))
            .order_by(IncidentMerge.id)))

    # ---- the incident list ---------------------------------------------------------

    def list_incidents(self, *, q: str | None, engine: str | None, version_ids: set[int] | None,
                       version: str | None, model_arch: str | None, gpu: str | None,
                       phase: str | None, has_fix: bool | None, path: str | None,
                       tag: str | None, sort: str, offset: int, limit: int,
                       view: str | None = None, log_terms: Sequence[str] = (),
                       status: str | None = None
                       ) -> tuple[list[tuple[Incident, int]], int]:
        """One page of live incidents and the total. `q` searches the curated text
        (LIKE, wildcards escaped) and, by `log_terms`, the stored logs (kb.db.logsearch);
        sort "relevance" puts text matches first, then the best log matches."""
        fix_count = (select(func.count(Fix.id)).where(Fix.incident_id == Incident.id)
                     .correlate(Incident).scalar_subquery())
        conditions: list[Any] = [Incident.merged_into_id.is_(None)]
        log_scores = logsearch.incident_scores(self.dialect, log_terms) if q and log_terms else None
        text_match: Any = None
        if q:
            like = f"%{_like_literal(q.lower())}%"
            text_match = or_(*(func.lower(col).like(like, escape="\\") for col in (
                Incident.title, Incident.signature, Incident.summary, Incident.slug,
                Incident.notes, Incident.exception)))
            conditions.append(text_match if log_scores is None
                              else or_(text_match, log_scores.c.score.is_not(None)))
        if view:
            conditions.append(_VIEWS[view]())
        if engine:
            conditions.append(func.lower(Incident.engine) == engine.lower())
        if phase:
            conditions.append(Incident.phase == phase)
        if path:
            conditions.append(Incident.recommended_path == path)
        if status:
            conditions.append(Incident.status == status)
        if has_fix is not None:
            has = exists().where(Fix.incident_id == Incident.id)
            conditions.append(has if has_fix else ~has)

        def facet(kind: str, *values_: Any) -> Any:
            return exists().where(IncidentFacet.incident_id == Incident.id,
                                  IncidentFacet.kind == kind, or_(*values_))

        if model_arch:
            conditions.append(facet("model_arch", IncidentFacet.value == model_arch.lower()))
        if tag:
            conditions.append(facet("tag", IncidentFacet.value == tag.lower()))
        if gpu:
            g = gpu.lower()
            conditions.append(or_(facet("gpu", IncidentFacet.value.like(f"%{_like_literal(g)}%",
                                                                        escape="\\")),
                                  facet("gpu_family", IncidentFacet.value == g)))
        if version:
            v = version.lower().lstrip("v")
            seen_on = facet("engine_version", IncidentFacet.value == v,
                            IncidentFacet.value.like(f"{_like_literal(v)}.%", escape="\\"))
            conditions.append(or_(seen_on, Incident.id.in_(version_ids or {-1})))
        where = and_(*conditions)
        source: Any = Incident
        if log_scores is not None:
            source = Incident.__table__.outerjoin(log_scores, log_scores.c.incident_id == Incident.id)
        total = self.s.execute(select(func.count()).select_from(source).where(where)).scalar_one()
        order = {
            "occurrences": (Incident.occurrence_count.desc(), Incident.id.desc()),
            "created": (Incident.created_at.desc(), Incident.id.desc()),
            "id": (Incident.id.asc(),),
            "title": (Incident.title.asc(), Incident.id.asc()),
        }.get(sort) or (Incident.last_seen.desc().nulls_last(), Incident.id.desc())
        if sort == "relevance" and text_match is not None:
            ranked = [case((text_match, 0), else_=1)]
            if log_scores is not None:
                ranked.append(log_scores.c.score.asc().nulls_last())
            order = (*ranked, *order)
        rows = self.s.execute(select(Incident, fix_count).select_from(source).where(where)
                              .order_by(*order).offset(offset).limit(limit)).all()
        return [(r[0], r[1]) for r in rows], total

    def incidents_with_affected_versions(self, engine: str | None) -> list[tuple[int, str]]:
        """Curated incidents that declare an affected version range (few: the seeds)."""
        query = select(Incident.id, Incident.affected_versions).where(
            Incident.affected_versions.is_not(None), Incident.merged_into_id.is_(None))
        if engine:
            query = query.where(func.lower(Incident.engine) == engine.lower())
        return [(r[0], r[1]) for r in self.s.execute(query)]
