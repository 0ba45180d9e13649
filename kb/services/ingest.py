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

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy.exc import IntegrityError

from kb.core import textlog
from kb.core.analyze import analyze, analyze_for_storage
from kb.core.gpus import gpu_family
from kb.core.match import SIMILAR_THRESHOLD
from kb.core.records import Analysis, CrashFeatures
from kb.core.redact import redact_field
from kb.db import logsearch
from kb.db.known_upload import store_known_occurrence
from kb.db.logcodec import compress_log, decompressed_pieces
from kb.db.models import Incident, Occurrence, utcnow
from kb.db.repositories import IncidentHead, Repository, facet_values
from kb.db.session import Database
from kb.services.advice import advise, where_at, where_of
from kb.services.errors import InvalidInput, NotText, TooLarge
from kb.services.notifications import Notifier, spike_after_fast_store
from kb.services.matching import (
    MatchOutcome,
    exact_match,
    find_match,
    route_key,
    similar_incidents,
    unique_route,
)
from kb.services.ruleset import ruleset
from kb.services.upload_events import StoredUpload, record_upload_events
from kb.services.views import (
    OVERRIDE_FIELDS,
    IncidentRef,
    MatchView,
    OccurrenceRef,
    Overrides,
    SimilarView,
    UploadResult,
)

SIMILAR_SHOWN = 5
FAILURES = ("exit", "hang", "not_ready")  # why `kb run` uploaded
IDEMPOTENCY_KEY_MAX = 200


def prepare_log(data: bytes, max_bytes: int) -> bytes:
    """The upload as text bytes (kb.core.textlog), its refusal as the service error
    whose HTTP status says why: 400 empty, 413 too large, 422 not text."""
    try:
        return textlog.prepare_log(data, max_bytes)
    except textlog.EmptyLog as exc:
        raise InvalidInput(str(exc)) from None
    except textlog.LogTooLarge as exc:
        raise TooLarge(str(exc)) from None
    except textlog.LogRejected as exc:
        raise NotText(str(exc)) from None


def clip(value: str | None, size: int) -> str | None:
    """Fit a value from the log into its column (Postgres enforces lengths)."""
    return value[:size] if value else value


# Integer overrides and the values they may take (the OpenAPI schema says the same).
INTEGER_OVERRIDES = {"gpu_count": (0, 1_000_000), "tp": (0, 1_000_000), "dp": (0, 1_000_000),
                     "pp": (0, 1_000_000), "ep": (0, 1_000_000), "exit_code": (-(2**31), 2**31 - 1)}
_LENGTHS = {"command": 1000, "cuda_visible_devices": 200, "torch_version": 60}


def parse_overrides(values: Mapping[str, Any]) -> Overrides:
    parsed: dict[str, Any] = {}
    for name in OVERRIDE_FIELDS:
        raw = values.get(name)
        if raw is None:
            continue
        text = str(raw).strip()
        if not text:
            continue
        if name in INTEGER_OVERRIDES:
            try:
                parsed[name] = int(text)
            except ValueError:
                raise InvalidInput(f"{name} must be an integer, got {text[:40]!r}") from None
            low, high = INTEGER_OVERRIDES[name]
            if not low <= parsed[name] <= high:
                raise InvalidInput(f"{name} is out of range: {parsed[name]}")
        elif name == "failure":
            if text not in FAILURES:
                raise InvalidInput(f"failure must be one of {', '.join(FAILURES)}, "
                                   f"got {text[:40]!r}")
            parsed[name] = text
        else:
            # Every text field is stored and shown: the command line `kb run` sends
            # (`env HF_TOKEN=... vllm serve --api-key ...`) most of all. Redacted whole,
            # then cut to its column (a cut could leave half a secret a rule misses).
            parsed[name] = redact_field(text)[:_LENGTHS.get(name, 300)]
    return Overrides(**parsed)


def check_idempotency_key(raw: str | None) -> str | None:
    """The Idempotency-Key header as stored: None when absent or blank, else printable
    ASCII of at most IDEMPOTENCY_KEY_MAX characters (400 otherwise)."""
    key = redact_field((raw or "").strip())
    if not key:
        return None
    if len(key) > IDEMPOTENCY_KEY_MAX:
        raise InvalidInput(f"Idempotency-Key is longer than {IDEMPOTENCY_KEY_MAX} characters")
    if not key.isascii() or not key.isprintable():
        raise InvalidInput("Idempotency-Key must be printable ASCII")
    return key


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


def analysis_dict(analysis: Analysis) -> dict[str, Any]:
    """Analysis.to_dict, by msgspec's C converter: 20x faster than dataclasses.asdict
    (0.3 ms an upload). The core keeps asdict: msgspec costs the CLI 20 ms to import,
    the service has it loaded already (Litestar's serializer)."""
    return msgspec.to_builtins(analysis)  # type: ignore[no-any-return]


def incident_url(base_url: str, incident_id: int) -> str:
    return f"{base_url.rstrip('/')}/incidents/{incident_id}"


def incident_ref(incident: Incident | IncidentHead, base_url: str) -> IncidentRef:
    return IncidentRef(id=incident.id, url=incident_url(base_url, incident.id),
                       title=incident.title, occurrences=incident.occurrence_count,
                       first_seen=incident.first_seen, last_seen=incident.last_seen,
                       slug=incident.slug)


TITLE_CHARS = 160
LOGGED_ERROR = "logged error"  # the analysis' kind for an ERROR line without an exception


def short_title(text: str, size: int = TITLE_CHARS) -> str:
    """`text` on one line, cut at a word boundary with an ellipsis when longer than `size`."""
    text = " ".join(text.split())
    if len(text) <= size:
        return text
    cut = text[:size - 1]
    if " " in cut[size // 2:]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.") + "…"


def title_for(analysis: Analysis) -> str:
    """The title of a new incident, from its root cause (redacted already, and again
    here: a title is shown everywhere). A log whose cause was not captured says so
    first, with the wrapper's own words; an ERROR line without an exception is its
    message, not "logged error: ..."; long titles end at a word, with an ellipsis."""
    event = analysis.root_cause or next(iter(analysis.symptoms), None)
    if not analysis.identifies and event is not None:
        said = event.message if event.exception == LOGGED_ERROR else event.headline
        return short_title(redact_field(f"Cause not captured: {said}"))
    signature = (analysis.fingerprint.signature or "").split(" | ")[0].strip()
    if signature.startswith(f"{LOGGED_ERROR}: "):
        signature = signature[len(LOGGED_ERROR) + 2:]
    if signature and signature != ":":
        return short_title(redact_field(signature))
    if analysis.root_cause is not None:
        return short_title(redact_field(analysis.root_cause.headline))
    return "Crash without a recognizable error"


def _similar(repo: Repository, match: MatchOutcome, exclude: int | None) -> list[SimilarView]:
    picked = [(i, s) for i, s in match.ranked if i != exclude and s.score >= SIMILAR_THRESHOLD]
    picked = picked[:SIMILAR_SHOWN]
    titles = repo.titles(i for i, _ in picked)
    return [SimilarView(i, s.score, titles.get(i, ("?", False))[0]) for i, s in picked]


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


def analyze_upload(db: Database, data: bytes, overrides: Overrides, *, base_url: str,
                   candidate_limit: int = 200, max_bytes: int = 256 << 20) -> UploadResult:
    """The full answer for a log without storing anything (POST /analyze)."""
    analysis, features = analyze_only(data, overrides, max_bytes=max_bytes)
    return answer(db, analysis, features, base_url=base_url, candidate_limit=candidate_limit)


def analyze_only(data: bytes, overrides: Overrides, *, max_bytes: int) -> tuple[Analysis, CrashFeatures]:
    """The first steps of POST /analyze: checked, analyzed, overrides applied; no storage."""
    return analyze_log(prepare_log(data, max_bytes), overrides)


def answer(db: Database, analysis: Analysis, features: CrashFeatures, *, base_url: str,
           candidate_limit: int = 200) -> UploadResult:
    """Match an analyzed crash and advise, storing nothing."""
    with db.read() as session:
        repo = Repository(session)
        match = find_match(repo, analysis.fingerprint, features, candidate_limit, analysis.identifies)
        matched = match.head or (repo.head(match.incident_id) if match.incident_id else None)
        fixes, recommendation = advise(repo, matched, where_of(features), match.status)
        return UploadResult(
            incident=incident_ref(matched, base_url) if matched and match.status == "known" else None,
            occurrence=None, analysis=analysis_dict(analysis),
            match=MatchView(match.status, match.incident_id, match.score, match.explanation),
            similar=_similar(repo, match, match.incident_id if match.status == "known" else None),
            fixes=fixes, recommendation=recommendation)


def ingest_upload(db: Database, data: bytes, overrides: Overrides, *, base_url: str,
                  candidate_limit: int = 200, max_bytes: int = 256 << 20,
                  attempts: int = 4, idempotency_key: str | None = None) -> UploadResult:
    """Analyze, match and store one upload (POST /incidents). With an idempotency key
    already stored, answer that upload again and store nothing."""
    if idempotency_key:
        replayed = replayed_upload(db, idempotency_key, base_url=base_url,
                                   candidate_limit=candidate_limit)
        if replayed is not None:
            return replayed
    upload = prepare_upload(data, overrides, max_bytes=max_bytes, idempotency_key=idempotency_key)
    return store_upload(db, upload, base_url=base_url, candidate_limit=candidate_limit,
                        attempts=attempts)


def replayed_upload(db: Database, idempotency_key: str, *, base_url: str,
                    candidate_limit: int = 200) -> UploadResult | None:
    """The answer of the upload already stored under this key, or None (cheap: looked
    up before the analysis)."""
    with db.read() as session:
        repo = Repository(session)
        first = repo.occurrence_by_idempotency_key(idempotency_key)
        return _replay(repo, first, base_url, candidate_limit) if first is not None else None


def store_upload(db: Database, upload: PreparedUpload, *, base_url: str,
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
        known = _store_known(db, analysis, features, occurrence, now, base_url)
        if known is not None:
            assert known.incident is not None
            spike_after_fast_store(db, notifier, known.incident.id, known.incident.title,
                                   known.incident.occurrences, now, known.incident.url)
            return known
    for attempt in range(attempts):
        try:
            with db.write() as session:
                repo = Repository(session)
                if idempotency_key:
                    first = repo.occurrence_by_idempotency_key(idempotency_key)
                    if first is not None:
                        return _replay(repo, first, base_url, candidate_limit)
                return _store(repo, analysis, features, occurrence, now, base_url,
                              candidate_limit, notifier)
        except IntegrityError:
            # Another upload stored the same new fingerprint (or the same idempotency
            # key) first: everything rolled back; look again.
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _replay(repo: Repository, first: Occurrence, base_url: str,
            candidate_limit: int) -> UploadResult:
    """The answer to a repeated idempotency key: the first upload's incident (where merges
    have taken it), occurrence, analysis and match verdict; its fixes and recommendation
    as they stand now. Stores nothing."""
    incident = repo.incident(repo.live_incident_id(first.incident_id))
    assert incident is not None  # occurrences are deleted with their incident
    similar = similar_incidents(repo, incident.id, repo.fingerprints_of(incident.id),
                                candidate_limit, SIMILAR_SHOWN)
    status = first.match_status
    matched_id = incident.id if status == "known" else (
        similar[0].incident_id if status == "similar" and similar else None)
    where = where_at(first.engine, first.engine_version, first.model_arch, first.gpu_name)
    fixes, recommendation = advise(repo, incident, where, "known")
    return UploadResult(
        incident=incident_ref(incident, base_url), occurrence=OccurrenceRef(first.id),
        analysis=first.analysis,
        match=MatchView(status, matched_id, first.match_score or 0.0,
                        [f"repeated upload (same Idempotency-Key): the answer of occurrence "
                         f"#{first.id}; nothing stored again"]),
        similar=similar, fixes=fixes, recommendation=recommendation, created=False,
        replayed=True)


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
                 occurrence: dict[str, Any], now: datetime, base_url: str
                 ) -> UploadResult | None:
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
        incident=incident_ref(head, base_url), occurrence=OccurrenceRef(occurrence_id),
        analysis=occurrence["analysis"],
        match=MatchView(match.status, match.incident_id, match.score, match.explanation),
        similar=[], fixes=fixes, recommendation=recommendation, created=False)


def _store(repo: Repository, analysis: Analysis, features: CrashFeatures,
           occurrence: dict[str, Any], now: datetime, base_url: str, candidate_limit: int,
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
        occurrences=head.occurrence_count, url=incident_url(base_url, head.id),
        log_url=f"{base_url.rstrip('/')}/occurrences/{occurrence_id}/log"), now)
    return UploadResult(
        incident=incident_ref(head, base_url), occurrence=OccurrenceRef(occurrence_id),
        analysis=occurrence["analysis"],
        match=MatchView(match.status, match.incident_id, match.score, match.explanation),
        similar=_similar(repo, match, head.id if not created else None),
        fixes=fixes, recommendation=recommendation, created=created)
