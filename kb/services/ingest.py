"""Upload a crash log: check it is a text log, analyze it, match it, store it as an
occurrence of the matched incident or as a new incident, and advise.

Everything here runs in a worker thread (the web layer never analyzes on the event
loop). The store happens in one transaction: an upload is stored whole or not at all.
Two concurrent uploads of the same new crash race on the unique (version, hash) of
incident_fingerprints; the loser's transaction rolls back and is retried, and the retry
finds the winner's incident by exact fingerprint, so one incident results.

An upload may carry an Idempotency-Key (the launch wrapper sends one per log and keeps it
across retries). It is stored with the occurrence under a unique constraint. A repeated
key is answered with the first upload's incident and occurrence (HTTP 200, `replayed`)
and stores nothing: looked up before the analysis (cheap), again inside the write
transaction, and when two retries race, the loser's insert violates the constraint, its
transaction rolls back whole and the retry finds the winner's occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from kb.core.analyze import analyze, analyze_for_storage
from kb.core.gpus import gpu_family
from kb.core.records import Analysis, CrashFeatures
from kb.db import logsearch
from kb.db.known_upload import store_known_occurrence
from kb.db.logcodec import compress_log, decompressed_pieces
from kb.db.models import utcnow
from kb.db.repositories import IncidentHead, Repository, facet_values
from kb.db.session import Database
from kb.services.advice import advise, where_of
from kb.services.answers import _similar, analysis_dict, incident_ref, title_for
from kb.services.notifications import Notifier, spike_after_fast_store
from kb.services.matching import (
    exact_match,
    find_match,
    route_key,
    unique_route,
)
from kb.services.replay import _replay, replayed_upload
from kb.services.ruleset import ruleset
from kb.services.upload_events import StoredUpload, record_upload_events
from kb.services.upload_form import clip, prepare_log
from kb.services.views import (
    MatchView,
    OccurrenceRef,
    Overrides,
    UploadResult,
)

# Moved to their own modules (the upload's form, its answer, the replay) and still
# importable from here as kb.services.ingest.<name>:
from kb.services.answers import LOGGED_ERROR, SIMILAR_SHOWN, TITLE_CHARS, short_title  # noqa: F401
from kb.services.upload_form import (  # noqa: F401
    FAILURES,
    IDEMPOTENCY_KEY_MAX,
    INTEGER_OVERRIDES,
    OVERRIDE_FIELDS,
    check_idempotency_key,
    parse_overrides,
)


def analyze_log(data: bytes, overrides: Overrides) -> tuple[Analysis, CrashFeatures]:
    return with_overrides(analyze(data), overrides)


def with_overrides(analysis: Analysis, overrides: Overrides) -> tuple[Analysis, CrashFeatures]:
    """The analysis with what the uploader said put over what the log says."""
    ctx = analysis.context
    changed = []
    for name, target, attr in (
        ("engine", ctx, "engine"), ("engine_version", ctx, "engine_version"),
        ("model", ctx, "model"), ("model_arch", ctx, "model_arch"), ("gpu", ctx.gpu, "name"),
        ("gpu_count", ctx.gpu, "count"), ("tp", ctx.parallel, "tp"), ("dp", ctx.parallel, "dp"),
        ("pp", ctx.parallel, "pp"), ("ep", ctx.parallel, "ep"),
    ):
        value = getattr(overrides, name)
        if value is not None and getattr(target, attr) != value:
            setattr(target, attr, value)
            changed.append(name)
    if changed:
        analysis.notes.append(f"set by the uploader: {', '.join(changed)}")
    return analysis, CrashFeatures.from_analysis(analysis)


@dataclass(slots=True)
class PreparedUpload:
    """An upload analyzed and made ready to store: the first steps of the pipeline
    (prepare -> analyze -> redact), done once; matching and storing read it only."""

    analysis: Analysis
    features: CrashFeatures
    occurrence: dict[str, Any]  # the occurrence row, but for where it lands


def prepare_upload(data: bytes, overrides: Overrides, *, max_bytes: int,
                   idempotency_key: str | None = None) -> PreparedUpload:
    data = prepare_log(data, max_bytes)
    analyzed, stored, redactions = analyze_for_storage(data)
    return prepared_upload(analyzed, overrides, log_compressed=compress_log(stored),
                           log_bytes=len(stored), redactions=redactions,
                           idempotency_key=idempotency_key, log=stored)


def prepared_upload(analyzed: Analysis, overrides: Overrides, *, log_compressed: bytes,
                    log_bytes: int, redactions: int, idempotency_key: str | None = None,
                    log: bytes | None = None) -> PreparedUpload:
    """An upload ready to store from its analysis and its redacted, compressed log (made
    whole by prepare_upload, which passes the redacted `log` too, or as the body streamed
    in: kb.services.streamupload, whose search excerpt is read back as it decompresses)."""
    analysis, features = with_overrides(analyzed, overrides)
    analysis_json = analysis_dict(analysis)
    excerpt = (logsearch.search_text(log, analysis_json) if log is not None else
               logsearch.search_text_of_stream(decompressed_pieces(log_compressed), log_bytes, analysis_json))
    occurrence = _occurrence_values(analysis, overrides, utcnow(), analysis_json=analysis_json,
                                    search_text=excerpt,
                                    log_compressed=log_compressed, log_bytes=log_bytes,
                                    log_lines=analysis.lines, redactions=redactions,
                                    idempotency_key=idempotency_key)
    return PreparedUpload(analysis, features, occurrence)


def analyze_upload(db: Database, data: bytes, overrides: Overrides, *,
                   candidate_limit: int = 200, max_bytes: int = 256 << 20) -> UploadResult:
    """The full answer for a log without storing anything (POST /analyze)."""
    analysis, features = analyze_only(data, overrides, max_bytes=max_bytes)
    return answer(db, analysis, features, candidate_limit=candidate_limit)


def analyze_only(data: bytes, overrides: Overrides, *, max_bytes: int) -> tuple[Analysis, CrashFeatures]:
    """The first steps of POST /analyze: checked, analyzed, overrides applied; no storage."""
    return analyze_log(prepare_log(data, max_bytes), overrides)


def answer(db: Database, analysis: Analysis, features: CrashFeatures, *,
           candidate_limit: int = 200) -> UploadResult:
    """Match an analyzed crash and advise, storing nothing."""
    with db.read() as session:
        repo = Repository(session)
        match = find_match(repo, analysis.fingerprint, features, candidate_limit, analysis.identifies)
        matched = match.head or (repo.head(match.incident_id) if match.incident_id else None)
        fixes, recommendation = advise(repo, matched, where_of(features), match.status)
        return UploadResult(
            incident=incident_ref(matched) if matched and match.status == "known" else None,
            occurrence=None, analysis=analysis_dict(analysis),
            match=MatchView(match.status, match.incident_id, match.score, match.explanation),
            similar=_similar(repo, match, match.incident_id if match.status == "known" else None),
            fixes=fixes, recommendation=recommendation)


def ingest_upload(db: Database, data: bytes, overrides: Overrides, *,
                  candidate_limit: int = 200, max_bytes: int = 256 << 20,
                  attempts: int = 4, idempotency_key: str | None = None) -> UploadResult:
    """Analyze, match and store one upload (POST /incidents). With an idempotency key
    already stored, answer that upload again and store nothing."""
    if idempotency_key:
        replayed = replayed_upload(db, idempotency_key, candidate_limit=candidate_limit)
        if replayed is not None:
            return replayed
    upload = prepare_upload(data, overrides, max_bytes=max_bytes, idempotency_key=idempotency_key)
    return store_upload(db, upload, candidate_limit=candidate_limit, attempts=attempts)


def store_upload(db: Database, upload: PreparedUpload, *,
                 candidate_limit: int = 200, attempts: int = 4,
                 notifier: Notifier | None = None) -> UploadResult:
    """Match and store a prepared upload in one transaction (retried when a concurrent
    upload of the same new crash or the same idempotency key wins), then advise. What it
    means (new incident, regression, spike) goes to `notifier`'s outbox in that same
    transaction (kb.services.upload_events)."""
    analysis, features, occurrence = upload.analysis, upload.features, upload.occurrence
    idempotency_key = occurrence["idempotency_key"]
    now = occurrence["created_at"]
    if db.dialect == "postgresql" and analysis.identifies and not analysis.fingerprint.weak:
        known = _store_known(db, analysis, features, occurrence, now)
        if known is not None:
            assert known.incident is not None
            spike_after_fast_store(db, notifier, known.incident.id, known.incident.title,
                                   known.incident.occurrences, now)
            return known
    for attempt in range(attempts):
        try:
            with db.write() as session:
                repo = Repository(session)
                if idempotency_key:
                    first = repo.occurrence_by_idempotency_key(idempotency_key)
                    if first is not None:
                        return _replay(repo, first, candidate_limit)
                return _store(repo, analysis, features, occurrence, now, candidate_limit,
                              notifier)
        except IntegrityError:
            # Another upload stored the same new fingerprint (or the same idempotency
            # key) first: everything rolled back; look again.
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _occurrence_values(analysis: Analysis, overrides: Overrides, now: datetime, *,
                      analysis_json: dict[str, Any], search_text: str | None = None,
                      log_compressed: bytes, log_bytes: int,
                      log_lines: int, redactions: int, idempotency_key: str | None
                      ) -> dict[str, Any]:
    """The occurrence row of an upload, but for where it lands (incident_id, match_status,
    match_score): the store that matches it fills those in."""
    ctx = analysis.context
    return dict(
        fingerprint_hash=analysis.fingerprint.hash, analysis=analysis_json,
        log_compressed=log_compressed, log_bytes=log_bytes, log_lines=log_lines,
        redactions=redactions, engine=clip(ctx.engine, 40),
        engine_version=clip(ctx.engine_version, 60), model=clip(ctx.model, 300),
        model_arch=clip(ctx.model_arch, 120), gpu_name=clip(ctx.gpu.name, 120),
        gpu_count=ctx.gpu.count, tp=ctx.parallel.tp, dp=ctx.parallel.dp, pp=ctx.parallel.pp,
        ep=ctx.parallel.ep, phase=clip(analysis.phase, 40), reporter=overrides.reporter,
        host=overrides.host, command=overrides.command, exit_code=overrides.exit_code,
        cuda_visible_devices=overrides.cuda_visible_devices,
        torch_version=overrides.torch_version, failure=overrides.failure,
        ruleset=ruleset(), idempotency_key=idempotency_key, search_text=search_text,
        created_at=now)


def _facets(analysis: Analysis) -> set[tuple[str, str]]:
    """The facets an upload adds to its incident (what it was seen on)."""
    ctx = analysis.context
    return facet_values([
        ("model_arch", ctx.model_arch), ("gpu", ctx.gpu.name),
        ("gpu_family", gpu_family(ctx.gpu.name)),
        ("engine_version", ctx.engine_version.lstrip("v") if ctx.engine_version else None),
    ])


def _store_known(db: Database, analysis: Analysis, features: CrashFeatures,
                 occurrence: dict[str, Any], now: datetime) -> UploadResult | None:
    """A repeat of a known crash on Postgres: stored by one statement in autocommit
    (kb.db.known_upload), then advised. None when the general path must store it: no
    live incident has its exact route, or its idempotency key is taken (a retry racing
    the first upload: the general path answers it with the first upload)."""
    fp = analysis.fingerprint
    try:
        stored = store_known_occurrence(
            db.autocommit_engine, route_key(fp, features),
            {**occurrence, "match_status": "known", "match_score": 100.0}, _facets(analysis), now)
    except IntegrityError:
        return None
    if stored is None:
        return None
    head, occurrence_id = stored
    match = exact_match(head, fp)
    with db.read() as session:
        fixes, recommendation = advise(Repository(session), head, where_of(features), "known")
    return UploadResult(
        incident=incident_ref(head), occurrence=OccurrenceRef(occurrence_id),
        analysis=occurrence["analysis"],
        match=MatchView(match.status, match.incident_id, match.score, match.explanation),
        similar=[], fixes=fixes, recommendation=recommendation, created=False)


def _store(repo: Repository, analysis: Analysis, features: CrashFeatures,
           occurrence: dict[str, Any], now: datetime, candidate_limit: int,
           notifier: Notifier | None = None) -> UploadResult:
    """One upload's writes, in as few statements as the answer allows: a known crash
    costs the lookup, the occurrence insert, the advice reads and the counter update."""
    fp = analysis.fingerprint
    match = find_match(repo, fp, features, candidate_limit, analysis.identifies)
    created = match.status != "known"
    if created:
        incident = repo.add_incident(
            title=title_for(analysis), engine=clip(features.engine, 40),
            phase=clip(features.phase, 40), fingerprint_hash=fp.hash,
            fingerprint_version=fp.version, signature=fp.signature,
            exception=fp.exception[:300] or None, tags=[], links=[], model_archs=[],
            gpu_families=[], occurrence_count=0, created_at=now, updated_at=now)
        head = IncidentHead(id=incident.id, title=incident.title, slug=None,
                            engine=incident.engine, engine_limitation=False,
                            next_incident_id=None, occurrence_count=0, first_seen=None,
                            last_seen=None, fix_count=0, facets=set())
        if analysis.identifies and not fp.weak:
            repo.add_fingerprint(incident.id, fp.version, fp.hash, route_key(fp, features), features, "upload")
        elif analysis.identifies:  # weak: a route of its own, but recalled as similar later
            repo.add_fingerprint(incident.id, fp.version, fp.hash, unique_route(), features, "upload")
        else:  # a route of its own and nothing a later crash could be recalled or scored by
            repo.add_fingerprint(incident.id, fp.version, fp.hash, unique_route(),
                                 CrashFeatures(exception="", message_template=""), "upload")
    else:
        assert match.incident_id is not None
        found = match.head or repo.head(match.incident_id)
        assert found is not None
        head = found
        if match.adds_alias:
            # A fuzzy "known" match sure enough: route this fingerprint here from now on.
            repo.add_fingerprint(head.id, fp.version, fp.hash, route_key(fp, features),
                                 features, "upload")
    occurrence_id = repo.add_occurrence({**occurrence, "incident_id": head.id,
                                         "match_status": match.status,
                                         "match_score": match.score})
    if created:
        advised = repo.head(match.incident_id) if match.incident_id else None  # similar
    else:
        advised = head
    fixes, recommendation = advise(repo, advised, where_of(features), match.status)
    new_facets = _facets(analysis) - head.facets
    if new_facets:
        repo.add_facets(head.id, new_facets)
    repo.count_occurrence(head, now)  # last: it holds the incident's row lock until commit
    record_upload_events(repo.s, notifier, StoredUpload(
        incident_id=head.id, title=head.title, engine=head.engine, created=created,
        occurrence_id=occurrence_id, engine_version=occurrence["engine_version"],
        occurrences=head.occurrence_count), now)
    return UploadResult(
        incident=incident_ref(head), occurrence=OccurrenceRef(occurrence_id),
        analysis=occurrence["analysis"],
        match=MatchView(match.status, match.incident_id, match.score, match.explanation),
        similar=_similar(repo, match, head.id if not created else None),
        fixes=fixes, recommendation=recommendation, created=created)
