"""Fingerprints: the routes and aliases that lead a crash to its incident, and the
recall of stored fingerprints worth scoring (indexed lookups, term counts)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, bindparam, delete, select, union_all
from sqlalchemy.dialects import postgresql, sqlite

from kb.core.recall import RecallKeys, TermWeights, message_key, terms
from kb.core.records import CrashFeatures
from kb.db.models import IncidentFingerprint, TemplateTerm
from kb.db.repositories.base import RepositoryBase


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


def _candidate_lookups(with_context: bool) -> Select[Any]:
    """The recall lookups of kb.core.recall.RecallKeys as one UNION ALL, each bounded
    (SQLite allows LIMIT only in a subquery): same exception and message key, same
    exception newest first, same message key under another type, and, with_context, same
    engine and phase under another type."""
    fp = IncidentFingerprint
    exception = bindparam("exception")
    queries: list[Select[Any]] = [
        select(*_FEATURE_COLUMNS).where(fp.exception == exception, fp.message_key.in_(bindparam("message_keys", expanding=True)))
        .limit(bindparam("by_key")),
        select(*_FEATURE_COLUMNS).where(fp.exception == exception).order_by(fp.id.desc())
        .limit(bindparam("by_exception")),
    ]
    # the same statement under another exception type (a wrapper, another engine's type)
    queries.append(select(*_FEATURE_COLUMNS).where(
        fp.message_key.in_(bindparam("message_keys", expanding=True)), fp.exception != exception)
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


class FingerprintQueries(RepositoryBase):
    def fingerprint_by_route(self, route_key: str) -> IncidentFingerprint | None:
        return self.s.execute(select(IncidentFingerprint).where(
            IncidentFingerprint.route_key == route_key)).scalar_one_or_none()

    def candidates(self, keys: RecallKeys, limit: int) -> list[Candidate]:
        """Stored fingerprints worth scoring, through the indexed lookups of `keys` in one
        round trip, each bounded (kb.core.recall.RecallKeys). Never a scan of all incidents."""
        statement = _CANDIDATES_WITH_CONTEXT if keys.engine and keys.phase else _CANDIDATES
        params = {"exception": keys.exception, "message_keys": keys.message_keys,
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
