"""The JSON API. Each handler parses its input, calls one service function in a worker
thread (analysis and database work never run on the event loop) and returns the
service's struct, linked (kb/web/links.py adds the URLs). Errors are mapped to HTTP in
kb/web/app.py, in one place."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from html import escape
from typing import Annotated as Q
from typing import Any, TypeVar
from urllib.parse import urlencode

import anyio.to_thread
import msgspec
from litestar import MediaType, Request, Response, get, patch, post
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIFormat, OpenAPIMediaType, OpenAPIType, RequestBody, Schema
from litestar.params import JSONBody, PathParameter, QueryParameter
from litestar.response import Redirect

from kb import textreport
from kb.config import Settings
from kb.core.textlog import GZIP_MAGIC
from kb.core.recommend import PATHS
from kb.core.records import PHASES
from kb.db.repositories import VIEWS
from kb.db.session import Database
from kb.services import curate, ingest, queries, replay, upload_form
from kb.services.views import (
    FixPatch,
    FixView,
    Health,
    IncidentPatch,
    ListQuery,
    MergeRequest,
    NewFix,
    NewOutcome,
    OutcomeView,
    UploadResult,
)
from kb.services.errors import InvalidInput, Unavailable
from kb.services.streamupload import StreamedLog
from kb.web.answerforms import NegotiatedOperation
from kb.web.budget import ByteBudget, Reservation
from kb.web import links
from kb.web.links import base_url, linked, links_for
from kb.web.strictbody import strict
from kb.web.negotiate import FORMAT_DOC, VARY, AnswerFormat, answer_format
from kb.web.uploads import ANALYSIS_ROOM, INFLATE_ROOM, read_upload

T = TypeVar("T")
# A stored row's id in a path: what the databases' 64-bit keys can hold, so a larger
# number is a 400 from validation, not an error from the database. The OpenAPI document
# states the bounds as integers (Litestar would write a float, and 2**63 - 1 as a double
# reads as 2**63: clients would take 2**63 + 1 for a valid id).
MAX_ID = 2**63 - 1
StoredId = Q[int, PathParameter(ge=1, le=MAX_ID, schema_extra={"minimum": 1, "maximum": MAX_ID})]
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_DOC = (
    " Send a header `Idempotency-Key: <unique string>` (at most 200 printable ASCII "
    "characters) to make retries safe: an upload whose key was already stored is answered "
    "with that first upload's incident and occurrence (200, `replayed: true`) and stores "
    "nothing."
)


def settings_of(state: State) -> Settings:
    return state.settings  # type: ignore[no-any-return]


def db_of(state: State) -> Database:
    return state.db  # type: ignore[no-any-return]


async def in_thread(state: State, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Database work in a worker thread, bounded by KB_DB_TIMEOUT: a frozen database gives
    503 (Retry-After) within seconds instead of holding every request. The thread is
    abandoned, not killed: what it was writing may still commit once the database wakes,
    which is why the 503 points at Idempotency-Key retries."""
    deadline = settings_of(state).db_timeout
    try:
        with anyio.fail_after(deadline):
            return await anyio.to_thread.run_sync(partial(func, *args, **kwargs), abandon_on_cancel=True,
                                                  limiter=state.get("limiter"))
    except TimeoutError:
        raise Unavailable(f"the database did not answer within {deadline:g} s; retry later "
                          "(with the same Idempotency-Key, an upload is never stored twice)") from None


async def compute_in_thread(state: State, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """CPU work (analysing a log) in a worker thread: no deadline, it touches no database."""
    return await anyio.to_thread.run_sync(partial(func, *args, **kwargs), limiter=state.get("limiter"))


def budget_of(state: State) -> ByteBudget:
    return state.budget  # type: ignore[no-any-return]


async def upload_answer(request: Request, state: State, data: bytes | StreamedLog,
                        overrides: ingest.Overrides, *, store: bool, held: Reservation,
                        idempotency_key: str | None = None) -> links.UploadResult:
    """The pipeline of an upload for the API and the UI, to its linked answer: the
    analysis unbounded, each database step under the deadline, the memory of the
    analysis taken from the budget (a gzip body may inflate to the upload limit). A log
    analyzed as it streamed in (`StreamedLog`) has its analysis and compressed log
    already: it goes on from there."""
    result = await _upload_result(request, state, data, overrides, store=store, held=held,
                                  idempotency_key=idempotency_key)
    return linked(request, result)


async def _upload_result(request: Request, state: State, data: bytes | StreamedLog,
                         overrides: ingest.Overrides, *, store: bool, held: Reservation,
                         idempotency_key: str | None = None) -> UploadResult:
    settings, db = settings_of(state), db_of(state)
    streamed = data if isinstance(data, StreamedLog) else None
    if streamed is None:
        gzip = data[:2] == GZIP_MAGIC
        await held.take(INFLATE_ROOM * settings.max_upload_bytes if gzip else ANALYSIS_ROOM * len(data))
    if not store or (streamed is not None and streamed.log_compressed is None):
        if streamed is not None:
            analysis, features = ingest.with_overrides(streamed.analysis, overrides)
        else:
            analysis, features = await compute_in_thread(state, ingest.analyze_only, data, overrides,
                                                         max_bytes=settings.max_upload_bytes)
        return await in_thread(state, ingest.answer, db, analysis, features,
                               candidate_limit=settings.match_candidates)
    if idempotency_key:
        replayed = await in_thread(state, replay.replayed_upload, db, idempotency_key,
                                   candidate_limit=settings.match_candidates)
        if replayed is not None:
            return replayed
    if streamed is not None:
        prepared = await compute_in_thread(state, ingest.prepared_upload, streamed.analysis, overrides,
                                           log_compressed=streamed.log_compressed,
                                           log_bytes=streamed.log_bytes, redactions=streamed.redactions,
                                           idempotency_key=idempotency_key)
    else:
        prepared = await compute_in_thread(state, ingest.prepare_upload, data, overrides,
                                           max_bytes=settings.max_upload_bytes,
                                           idempotency_key=idempotency_key)
    notifier = state.get("notifier")
    if notifier is not None:  # its events link to the address this upload came to
        notifier = notifier.linked(links_for(request))
    return await in_thread(state, ingest.store_upload, db, prepared,
                           candidate_limit=settings.match_candidates, notifier=notifier)


# `?format=` on the routes whose answer a person reads (kb/web/negotiate.py has the rule)
Format = Q[AnswerFormat | None, QueryParameter(description=FORMAT_DOC)]


def negotiated(request: Request, explicit: AnswerFormat | None, struct: Any,
               text: Callable[..., str], *, page: str | None = None,
               status_code: int = 200) -> Response[Any]:
    """`struct` as JSON, as the text report `text` makes of its JSON form, or for a
    browser as the page at `page` (303) or the report inside a page."""
    form = answer_format(explicit, request.headers.get("accept"), request.headers.get("user-agent"))
    headers = {"Vary": VARY}
    if form == "json":
        return Response(struct, status_code=status_code, headers=headers)
    if form == "html" and page:
        return Redirect(page, status_code=303, headers=headers)
    report = text(msgspec.to_builtins(struct), base_url=base_url(request))
    if form == "html":
        return Response(f'<!doctype html><html lang="en"><meta charset="utf-8"><title>Crash KB</title>'
                        f'<link rel="stylesheet" href="/ui/static/kb.css"><pre>{escape(report)}</pre></html>',
                        status_code=status_code, headers=headers, media_type=MediaType.HTML)
    return Response(report, status_code=status_code, headers=headers,
                    media_type=MediaType.TEXT)


TOKEN_COOKIE = "kb_token"  # the UI keeps the token it signed in with here (kb/web/pages.py)
# Reads that stay open when KB_PROTECT_READS is set: liveness, signing in, static assets.
OPEN_READS = ("/healthz", "/ui/signin", "/ui/static/", "/schema/assets/")


def known_token(connection: ASGIConnection, token: str) -> bool:
    """`token` is one of KB_API_TOKENS (compared in constant time)."""
    tokens = settings_of(connection.app.state).api_tokens
    return bool(token) and any(hmac.compare_digest(token.encode(), t.encode()) for t in tokens)


def token_ok(connection: ASGIConnection, *, cookie: bool = False) -> bool:
    """The request carries one of KB_API_TOKENS: `Authorization: Bearer`, or (pages)
    the sign-in cookie."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and known_token(connection, token.strip()):
        return True
    return cookie and known_token(connection, connection.cookies.get(TOKEN_COOKIE, ""))


def reads_allowed(connection: ASGIConnection) -> bool:
    """KB_PROTECT_READS: a read needs a token like a write; the open ones excepted."""
    settings = settings_of(connection.app.state)
    if not (settings.protect_reads and settings.api_tokens):
        return True
    if connection.scope.get("method", "GET") not in ("GET", "HEAD"):
        return True  # writes have their own guard
    path = connection.scope.get("path", "")
    return path.startswith(OPEN_READS) or token_ok(connection, cookie=True)


async def require_token(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Writes need `Authorization: Bearer <token>` when KB_API_TOKENS is set. Async
    although it never waits: Litestar runs a sync guard in a worker thread, a thread
    handoff on every upload."""
    if not settings_of(connection.app.state).api_tokens or token_ok(connection):
        return
    raise NotAuthorizedException(detail="this write needs Authorization: Bearer <token> "
                                        "(KB_API_TOKENS is set)",
                                 headers={"WWW-Authenticate": 'Bearer realm="crash-kb"'})


@dataclass
class ErrorBody:
    """Every error answer (kb/web/app.py builds them)."""

    status_code: int
    detail: str
    extra: Any | None = None  # e.g. which JSON field failed validation


ERROR_MEANINGS = {
    400: "Bad input; `detail` says what.",
    401: "KB_API_TOKENS is set and the request has no valid `Authorization: Bearer <token>`.",
    403: "A write that a browser sent from another site's page.",
    404: "No such id.",
    409: "Impossible merge or unmerge (into itself, already merged, not merged).",
    413: "The log is larger than KB_MAX_UPLOAD_MB (before or after gzip decompression).",
    415: "Unsupported media type or content encoding.",
    422: "The upload is not a text log; `detail` says why.",
    503: "The database is unavailable; nothing was stored. Retry after `Retry-After` seconds.",
}
WRITE_ERRORS = (401, 403)
UPLOAD_ERRORS = (413, 415, 422)


def errors(*codes: int) -> dict[int, ResponseSpec]:
    """The error answers of a route for its OpenAPI entry: 400 and 503 may come from
    any route, `codes` are its own."""
    return {code: ResponseSpec(ErrorBody, description=ERROR_MEANINGS[code], generate_examples=False)
            for code in sorted({400, 503, *codes})}


UPLOAD_DOC = (
    "Send the log as multipart/form-data in field `log` (`curl -F log=@vllm.log ...`), "
    "or as the raw body (text/plain, application/gzip, or Content-Encoding: gzip). "
    "Optional form fields (or query parameters) override what the log says: "
    + ", ".join(upload_form.OVERRIDE_FIELDS) + " (`failure` is one of "
    + ", ".join(upload_form.FAILURES) + "). Errors: 400 empty or missing log, 413 too "
    "large (KB_MAX_UPLOAD_MB), 415 unsupported media type, 422 not a text log, 503 "
    "database unavailable (Retry-After)."
)


@dataclass
class UploadOperation(NegotiatedOperation):
    """OpenAPI for the upload routes: the body is read by hand (streamed, size-checked),
    so describe it here."""

    def __post_init__(self) -> None:
        super().__post_init__()
        fields = {name: Schema(type=OpenAPIType.STRING) for name in upload_form.OVERRIDE_FIELDS}
        for name, (low, high) in upload_form.INTEGER_OVERRIDES.items():
            fields[name] = Schema(type=OpenAPIType.INTEGER, minimum=low, maximum=high)
        fields["failure"] = Schema(type=OpenAPIType.STRING, enum=list(upload_form.FAILURES))
        self.request_body = RequestBody(required=True, content={
            "multipart/form-data": OpenAPIMediaType(schema=Schema(
                type=OpenAPIType.OBJECT, required=["log"],
                properties={"log": Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY),
                            **fields})),
            "text/plain": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
            "application/gzip": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING,
                                                               format=OpenAPIFormat.BINARY)),
        })


async def _upload_input(request: Request, held: Reservation,
                        store: bool) -> tuple[bytes | StreamedLog, ingest.Overrides]:
    settings = settings_of(request.app.state)
    data, fields = await read_upload(request, settings.max_upload_bytes, held, store=store)
    values: dict[str, Any] = {k: v for k, v in request.query_params.items()
                              if k in upload_form.OVERRIDE_FIELDS}
    values.update(fields)
    return data, upload_form.parse_overrides(values)


@post("/incidents", guards=[require_token], request_max_body_size=None,
      operation_class=UploadOperation,
      summary="Upload a crash log", description=UPLOAD_DOC + IDEMPOTENCY_DOC, tags=["incidents"],
      responses={200: ResponseSpec(links.UploadResult, description="matched a known incident"),
                 201: ResponseSpec(links.UploadResult, description="stored as a new incident"),
                 **errors(*WRITE_ERRORS, *UPLOAD_ERRORS)})
async def upload_incident(request: Request, state: State,
                          format: Format = None) -> Response[links.UploadResult]:
    key = upload_form.check_idempotency_key(request.headers.get(IDEMPOTENCY_HEADER))
    async with budget_of(state).reservation() as held:
        data, overrides = await _upload_input(request, held, store=True)
        result = await upload_answer(request, state, data, overrides, store=True, held=held,
                                     idempotency_key=key)
    page = f"/ui/incidents/{result.incident.id}" if result.incident else None
    return negotiated(request, format, result, textreport.upload_report, page=page,
                      status_code=201 if result.created else 200)


@post("/analyze", request_max_body_size=None, status_code=200, tags=["incidents"],
      operation_class=UploadOperation, responses=errors(403, *UPLOAD_ERRORS),
      summary="Analyze and match a crash log without storing it", description=UPLOAD_DOC)
async def analyze_log(request: Request, state: State,
                      format: Format = None) -> Response[links.UploadResult]:
    async with budget_of(state).reservation() as held:
        data, overrides = await _upload_input(request, held, store=False)
        result = await upload_answer(request, state, data, overrides, store=False, held=held)
    return negotiated(request, format, result, textreport.upload_report)


@get("/incidents", tags=["incidents"], summary="Search and filter incidents", responses=errors(),
     operation_class=NegotiatedOperation)
async def list_incidents(
    request: Request, state: State,
    q: Q[str | None, QueryParameter(description=(
        "text in title, signature, summary, notes; and in the stored logs: every "
        "whitespace-separated term of 3+ characters, literally (a path, a file name, a "
        "mangled symbol); `log_match` shows the line that matched"))] = None,
    engine: Q[str | None, QueryParameter(description="vllm, sglang, ...")] = None,
    version: Q[str | None, QueryParameter(description="engine version seen or affected")] = None,
    model_arch: Q[str | None, QueryParameter(description="HF model_type, e.g. kimi_k2")] = None,
    gpu: Q[str | None, QueryParameter(description="GPU name (substring) or family")] = None,
    phase: Q[str | None, QueryParameter(description="crash phase",
                                        schema_extra={"enum": list(PHASES)})] = None,
    has_fix: Q[bool | None, QueryParameter(description="only incidents with (or without) a fix")] = None,
    path: Q[str | None, QueryParameter(description="the recommended path",
                                       schema_extra={"enum": list(PATHS)})] = None,
    tag: Q[str | None, QueryParameter(description="a tag")] = None,
    view: Q[str | None, QueryParameter(description=(
        "seen_here: uploaded here at least once; seeded: curated and never uploaded here; "
        "needs_triage: uploads whose cause the log did not show (wrapper-only)"),
        schema_extra={"enum": list(VIEWS)})] = None,
    sort: Q[str, QueryParameter(description=(
        "relevance (with q: text matches, then best log matches; else as last_seen), "
        "newest first, most occurrences first, ..."),
        schema_extra={"enum": list(queries.SORTS)})] = "relevance",
    status: Q[str | None, QueryParameter(description="resolve status (regressed: a resolved "
                                                     "incident that occurred again)",
                                         schema_extra={"enum": list(queries.STATUSES)})] = None,
    page: Q[int, QueryParameter(ge=1, le=queries.MAX_PAGE)] = 1,
    per_page: Q[int, QueryParameter(ge=1, le=queries.MAX_PER_PAGE)] = 50,
    format: Format = None,
) -> Response[links.IncidentList]:
    for name, value, allowed in (("phase", phase, PHASES), ("path", path, PATHS)):
        if value is not None and value not in allowed:
            raise InvalidInput(f"{name} must be one of {', '.join(allowed)}")
    query = ListQuery(q=q, engine=engine, version=version, model_arch=model_arch, gpu=gpu,
                      phase=phase, has_fix=has_fix, path=path, tag=tag, sort=sort, page=page,
                      per_page=per_page, view=view, status=status)
    listing = await in_thread(state, queries.list_incidents, db_of(state), query)
    kept = [(k, v) for k, v in request.query_params.items() if k != "format"]
    page_url = "/ui/incidents" + (f"?{urlencode(kept)}" if kept else "")
    return negotiated(request, format, linked(request, listing), textreport.list_report,
                      page=page_url)


@get("/incidents/{incident_id:int}", tags=["incidents"], operation_class=NegotiatedOperation,
     summary="One incident with its occurrences, fixes and similar incidents", responses=errors(404))
async def get_incident(request: Request, state: State, incident_id: StoredId,
                       format: Format = None) -> Response[links.IncidentDetail]:
    detail = await in_thread(state, queries.incident_detail, db_of(state), incident_id,
                             candidate_limit=settings_of(state).match_candidates)
    return negotiated(request, format, linked(request, detail), textreport.incident_report,
                      page=f"/ui/incidents/{incident_id}")


@patch("/incidents/{incident_id:int}", guards=[require_token], tags=["curation"],
       summary="Edit an incident's title, notes, tags or curated fields (next, affected_versions, "
               "fixed_in, engine_limitation)", responses=errors(*WRITE_ERRORS, 404))
async def patch_incident(request: Request, state: State, incident_id: StoredId,
                         data: JSONBody[IncidentPatch]) -> links.IncidentDetail:
    data = await strict(request, data)
    return linked(request, await in_thread(state, curate.patch_incident, db_of(state),
                                           incident_id, data))


@post("/incidents/{incident_id:int}/fixes", guards=[require_token], status_code=201,
      tags=["curation"], summary="Add a fix to an incident", responses=errors(*WRITE_ERRORS, 404))
async def add_fix(request: Request, state: State, incident_id: StoredId,
                  data: JSONBody[NewFix]) -> FixView:
    data = await strict(request, data)
    return await in_thread(state, curate.add_fix, db_of(state), incident_id, data)


@patch("/fixes/{fix_id:int}", guards=[require_token], tags=["curation"],
       summary="Edit a fix's title, kind, description, change or applies_to",
       responses=errors(*WRITE_ERRORS, 404))
async def edit_fix(request: Request, state: State, fix_id: StoredId,
                   data: JSONBody[FixPatch]) -> FixView:
    data = await strict(request, data)
    return await in_thread(state, curate.edit_fix, db_of(state), fix_id, data)


@post("/fixes/{fix_id:int}/outcomes", guards=[require_token], status_code=201,
      tags=["curation"], summary="Report whether a fix worked, and where",
      responses=errors(*WRITE_ERRORS, 404))
async def add_outcome(request: Request, state: State, fix_id: StoredId,
                      data: JSONBody[NewOutcome]) -> OutcomeView:
    data = await strict(request, data)
    return await in_thread(state, curate.add_outcome, db_of(state), fix_id, data)


@post("/incidents/{incident_id:int}/merge", guards=[require_token], status_code=200,
      tags=["curation"], summary="Merge a duplicate incident into another one",
      responses=errors(*WRITE_ERRORS, 404, 409))
async def merge_incident(request: Request, state: State, incident_id: StoredId,
                         data: JSONBody[MergeRequest]) -> links.IncidentDetail:
    data = await strict(request, data)
    return linked(request, await in_thread(state, curate.merge_incident, db_of(state),
                                           incident_id, data))


@post("/incidents/{incident_id:int}/unmerge", guards=[require_token], status_code=200,
      tags=["curation"], summary="Undo the merge of an incident into another one",
      description="Its occurrences, fixes and fingerprints come back, and later uploads of "
                  "its crash route to it again. 409 when it is not merged, or was merged "
                  "before merges were recorded.",
      responses=errors(*WRITE_ERRORS, 404, 409))
async def unmerge_incident(request: Request, state: State, incident_id: StoredId) -> links.IncidentDetail:
    return linked(request, await in_thread(state, curate.unmerge_incident, db_of(state),
                                           incident_id))


@get("/occurrences/{occurrence_id:int}/log", tags=["incidents"], media_type="text/plain",
     summary="The stored (redacted) log of one upload", responses=errors(404))
async def occurrence_log(state: State, occurrence_id: StoredId) -> str:
    return await in_thread(state, queries.occurrence_log, db_of(state), occurrence_id)


@get("/healthz", tags=["service"], summary="Liveness and database reachability", responses=errors())
async def healthz(state: State) -> Health:
    return await in_thread(state, queries.health, db_of(state))


ROUTES = [upload_incident, analyze_log, list_incidents, get_incident, patch_incident, add_fix,
          edit_fix, add_outcome, merge_incident, unmerge_incident, occurrence_log, healthz]
