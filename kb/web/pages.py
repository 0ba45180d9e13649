"""The team's HTML pages: browse, read, upload and curate incidents.

Server-rendered with Jinja (autoescape on: log text is always escaped). Every page
renders the same structs the JSON API returns (kb.services.views, linked by
kb.web.links), obtained from the same service functions (kb.services.queries / curate /
ingest); forms post to /ui routes that call those functions and redirect back
(Post/Redirect/Get).

Writes honour KB_API_TOKENS: when tokens are set, the browser signs in once at
/ui/signin with a token, kept in an HttpOnly, SameSite=Strict cookie that every UI
write checks exactly like the API checks `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from string import Formatter
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from litestar import MediaType, Request, Response, get, post
from litestar.datastructures import Cookie, State
from litestar.response import Redirect
from litestar.static_files import create_static_files_router

from kb.core.engines import ENGINES as CORE_ENGINES
from kb.core.recommend import FIX_KINDS, PATHS
from kb.core.records import PHASES
from kb.services import curate, queries, upload_form
from kb.services.errors import InvalidInput, ServiceError
from kb.services.queries import TIMELINE_DAYS
from kb.services.streamupload import StreamedLog
from kb.services.views import (
    FixPatch,
    IncidentPatch,
    ListQuery,
    MergeRequest,
    NewFix,
    NewOutcome,
)
from kb.web.api import (
    TOKEN_COOKIE,
    StoredId,
    budget_of,
    db_of,
    in_thread,
    known_token,
    settings_of,
    upload_answer,
)
from kb.web.budget import Reservation
from kb.web import links
from kb.web.links import linked
from kb.web.logbody import LogBody
from kb.web.uploads import read_form

HERE = Path(__file__).parent
ENGINES = tuple(e for e in CORE_ENGINES if e != "other")  # the list filter's choices
UPLOAD_FORM_FIELDS = frozenset({*upload_form.OVERRIDE_FIELDS, "text", "mode"})

_env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = float(seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


_env.filters["when"] = _when
_env.filters["duration"] = _duration
_env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)


# ---- rendering ----------------------------------------------------------------------


def _signed_in(request: Request) -> bool:
    return known_token(request, request.cookies.get(TOKEN_COOKIE, ""))


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response[str]:
    tokens_required = bool(settings_of(request.app.state).api_tokens)
    html = _env.get_template(template).render(
        request_path=request.url.path, tokens_required=tokens_required,
        signed_in=_signed_in(request) if tokens_required else False,
        message=notice_text(request.query_params), **context)
    return Response(html, status_code=status_code, media_type=MediaType.HTML)


# What a page may announce after a write. A redirect names one of these and its numbers;
# the page shows only these texts, so a crafted link cannot make the KB say something
# it did not, as a free-text parameter could.
NOTICES = {
    "saved": "Saved.",
    "fix-added": "Fix added.",
    "fix-saved": "Fix saved.",
    "outcome": "Outcome recorded.",
    "worked": "Recorded: fix #{fix} worked.",
    "failed": "Recorded: fix #{fix} failed.",
    "merged": "Merged #{merged} into #{into}.",
    "unmerged": "Unmerged #{unmerged}: its occurrences, fixes and fingerprints are back.",
    "resolved": "Resolved: a later occurrence at or past the version reopens it as a regression.",
    "reopened": "Reopened.",
    "signed-in": "Signed in.",
    "signed-out": "Signed out.",
}
_NOTICE_FIELDS = {key: [name for _, name, _, _ in Formatter().parse(text) if name]
                  for key, text in NOTICES.items()}


def notice_text(params: Any) -> str | None:
    """The notice a redirect asked for (`?done=merged&merged=3&into=2`), or None when the
    query names no notice or gives a field that is not a number."""
    key = params.get("done") or ""
    if key not in NOTICES:
        return None
    fields = {name: params.get(name) or "" for name in _NOTICE_FIELDS[key]}
    if not all(value.isascii() and value.isdigit() and len(value) <= 12 for value in fields.values()):
        return None
    return NOTICES[key].format(**fields)


def error_page(request: Request, status: int, detail: str) -> Response[str]:
    return render(request, "error.html", status_code=status, status=status, detail=detail)


def see_other(path: str, notice: str, **numbers: int) -> Redirect:
    """303 to `path`, whose page then shows NOTICES[notice] filled with `numbers`."""
    assert notice in NOTICES and set(numbers) == set(_NOTICE_FIELDS[notice]), notice
    path, hash_, anchor = path.partition("#")
    query = urlencode({"done": notice, **numbers})
    return Redirect(path=f"{path}{'&' if '?' in path else '?'}{query}{hash_}{anchor}", status_code=303)


def may_write(request: Request) -> bool:
    """The same rule as the API's require_token, with the token from the UI cookie."""
    tokens = settings_of(request.app.state).api_tokens
    return not tokens or _signed_in(request)


def need_token(request: Request) -> Response[str]:
    back = request.headers.get("referer", "")
    path = "/" + back.split("://", 1)[-1].split("/", 1)[-1] if back else "/ui/incidents"
    return render(request, "signin.html", status_code=401, next=_safe_next(path),
                  error="This change needs an API token (KB_API_TOKENS is set): sign in first. "
                        "Your change was not saved.")


def _safe_next(path: str | None) -> str:
    return path if path and path.startswith("/ui/") and "//" not in path else "/ui/incidents"


# ---- list presentation ----------------------------------------------------------------


def sparkline(daily: list[int], width: int = 120, height: int = 24) -> dict[str, Any]:
    """Bars of an inline SVG chart of daily counts (sparse counts read better as bars
    than as a line); days without occurrences show as a thin baseline."""
    top = max(daily) or 1
    slot = width / max(1, len(daily))
    bars = []
    for i, n in enumerate(daily):
        h = max(1.0, round(n / top * (height - 2), 1)) if n else 0.0
        bars.append({"x": round(i * slot, 1), "y": round(height - h, 1), "w": round(max(1.0, slot - 1), 1),
                     "h": h, "n": n})
    return {"bars": [b for b in bars if b["n"]], "width": width, "height": height,
            "total": sum(daily), "peak": max(daily), "days": len(daily)}


# ---- read pages -------------------------------------------------------------------


@get("/", include_in_schema=False)
async def home() -> Redirect:
    return Redirect(path="/ui/incidents", status_code=302)


# The list page's sort choices (the API takes every sort of kb.services.queries.SORTS),
# and its views as tabs: value ("" = all) and label.
LIST_SORTS = ("relevance", "last_seen", "occurrences")
LIST_VIEWS = (("", "All"), ("seen_here", "Seen here"), ("needs_triage", "Needs triage"),
              ("seeded", "Seeded, not seen here"))


def _query(params: dict[str, Any]) -> str:
    kept = {k: v for k, v in params.items() if v}
    return f"?{urlencode(kept)}" if kept else ""


def tag_url(tag: str) -> str:
    """The list of the incidents with this tag (a tag chip links here)."""
    return "/ui/incidents?" + urlencode({"tag": tag})


_env.globals["tag_url"] = tag_url


def _opt(params: Any, name: str) -> str | None:
    value = (params.get(name) or "").strip()
    return value or None


@get("/ui/incidents", include_in_schema=False)
async def incident_list_page(request: Request, state: State) -> Response[str]:
    params = request.query_params
    has_fix = {"yes": True, "no": False}.get(params.get("has_fix") or "")
    try:
        page = max(1, int(params.get("page") or 1))
    except ValueError:
        page = 1
    query = ListQuery(q=_opt(params, "q"), engine=_opt(params, "engine"),
                      version=_opt(params, "version"), model_arch=_opt(params, "model_arch"),
                      gpu=_opt(params, "gpu"), phase=_opt(params, "phase"), has_fix=has_fix,
                      path=_opt(params, "path"), tag=_opt(params, "tag"),
                      status=_opt(params, "status"),
                      sort=params.get("sort") if params.get("sort") in LIST_SORTS else "relevance",
                      page=page, per_page=50, view=_opt(params, "view"))
    try:
        found = await in_thread(state, queries.list_incidents, db_of(state), query)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    listing: links.IncidentList = linked(request, found)
    rows = [(item, sparkline(item.timeline.counts if item.timeline else [0] * TIMELINE_DAYS))
            for item in listing.items]
    form = {k: params.get(k) or "" for k in ("q", "engine", "version", "model_arch", "gpu",
                                             "phase", "path", "has_fix", "tag", "view", "status")}
    form["sort"] = query.sort
    keep = {k: v for k, v in form.items() if v and not (k == "sort" and v == "relevance")}
    pages = -(-listing.total // listing.per_page) if listing.total else 1

    def page_url(n: int) -> str:
        return "/ui/incidents?" + urlencode({**keep, "page": n})

    def view_url(view: str) -> str:  # the same filters, another view
        return "/ui/incidents" + _query({**keep, "view": view})

    return render(request, "list.html", listing=listing, rows=rows, form=form, engines=ENGINES,
                  phases=PHASES, paths=PATHS, pages=pages,
                  prev_url=page_url(page - 1) if page > 1 else None,
                  next_url=page_url(page + 1) if page < pages else None,
                  filtered=any(v for k, v in form.items() if k not in ("sort", "view")),
                  spark_days=TIMELINE_DAYS, views=LIST_VIEWS,
                  view_urls={v: view_url(v) for v, _ in LIST_VIEWS})


@get("/ui/incidents/{incident_id:int}", include_in_schema=False)
async def incident_detail_page(request: Request, state: State, incident_id: StoredId) -> Response[str]:
    try:
        found = await in_thread(state, queries.incident_detail, db_of(state), incident_id,
                                candidate_limit=settings_of(state).match_candidates)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    detail: links.IncidentDetail = linked(request, found)
    latest = detail.occurrences[0] if detail.occurrences else None
    return render(request, "detail.html", d=detail, analysis=detail.analysis, latest=latest,
                  fix_kinds=FIX_KINDS, may_write=may_write(request))


# ---- upload -----------------------------------------------------------------------


@get("/ui/upload", include_in_schema=False)
async def upload_page(request: Request) -> Response[str]:
    return render(request, "upload.html", result=None, form={}, may_write=may_write(request))


async def _upload_form(request: Request, limit: int,
                       held: Reservation) -> tuple[bytes | StreamedLog, dict[str, str]]:
    """The upload form, read as it streams in with the API's limits (a chunked body has
    no length to refuse up front): the chosen file (a large or gzip one analyzed as it
    arrives, kb.web.logbody), else the pasted text."""
    file = LogBody(request.app.state, limit, held, store=True)
    data, fields = await read_form(request, limit, UPLOAD_FORM_FIELDS, "log", frozenset({"text"}), held,
                                   file)
    if isinstance(data, StreamedLog):
        return data, fields
    data = data or b""
    if not data.strip():
        data = fields.get("text", "").replace("\r\n", "\n").encode("utf-8")
    if not data.strip():
        raise InvalidInput("choose a log file or paste the log text")
    return data, fields


@post("/ui/upload", include_in_schema=False, request_max_body_size=None)
async def upload_submit(request: Request, state: State) -> Response[str]:
    settings = settings_of(state)
    fields: dict[str, str] = {}
    try:
        async with budget_of(state).reservation() as held:
            data, fields = await _upload_form(request, settings.max_upload_bytes, held)
            store = fields.get("mode", "store") != "analyze"
            if store and not may_write(request):
                return need_token(request)
            overrides = upload_form.parse_overrides(fields)
            result = await upload_answer(request, state, data, overrides, store=store, held=held)
    except ServiceError as exc:
        form = {k: v for k, v in fields.items() if k != "text"}
        return render(request, "upload.html", status_code=exc.status_code, result=None,
                      form=form, error=exc.detail, may_write=may_write(request))
    status = 201 if result.created else 200
    return render(request, "upload.html", status_code=status, result=result, stored=store,
                  form={}, may_write=may_write(request))


# ---- curation (Post/Redirect/Get) -----------------------------------------------------


async def form_fields(request: Request) -> dict[str, str]:
    """A page form's text fields, trimmed."""
    form = await request.form()
    return {k: v.strip() for k, v in form.items() if isinstance(v, str)}


@post("/ui/incidents/{incident_id:int}/edit", include_in_schema=False)
async def edit_incident(request: Request, state: State, incident_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    form = await form_fields(request)
    tags = [t for t in form.get("tags", "").replace("\n", ",").split(",") if t.strip()]
    patch = IncidentPatch(title=form.get("title"), notes=form.get("notes", ""), tags=tags)
    if "curated" in form:  # the form's curated fields (a checkbox is absent when cleared)
        patch.next, patch.affected_versions = form.get("next", ""), form.get("affected_versions", "")
        patch.fixed_in, patch.engine_limitation = form.get("fixed_in", ""), "engine_limitation" in form
    try:
        await in_thread(state, curate.patch_incident, db_of(state), incident_id, patch)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return see_other(f"/ui/incidents/{incident_id}", "saved")


def _applies_to(form: dict[str, str]) -> dict[str, Any]:
    """The add form's applies-to inputs as the fix schema's keys (lists comma-separated)."""
    out: dict[str, Any] = {}
    for field, key in (("engine", "engine"), ("versions", "engine_versions"),
                       ("model_arch", "model_archs"), ("gpu", "gpu_families")):
        value = (form.get(f"applies_{field}") or "").strip()
        if value:
            out[key] = [v.strip() for v in value.split(",") if v.strip()] if key in LIST_KEYS else value
    return out


# Keys whose value is a list: repeated `key=` lines (or commas) add to it.
LIST_KEYS = ("flags", "model_archs", "gpu_families")


def _change(text: str, name: str = "change") -> dict[str, Any]:
    """A fix's change (or, in the edit form, where it applies) as the form writes it:
    `key=value` lines (`flags=--max-model-len 32768`, repeated for more flags;
    `env=NAME=value`; `version=0.11.0`; `engine=sglang`), or a JSON object. The fix
    schema then checks the keys and values (kb.core.fixschema)."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{name}: not valid JSON: {exc}", field=name) from None
        if not isinstance(value, dict):
            raise InvalidInput(f"{name}: must be a JSON object", field=name)
        return value
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise InvalidInput(f"{name}: lines look like key=value, got {line.strip()[:60]!r}",
                               field=name)
        if key == "env":
            env_name, env_sep, env_value = value.partition("=")
            if not env_sep:
                raise InvalidInput(f"{name}.env: write env=NAME=value, got {value[:60]!r}",
                                   field=f"{name}.env")
            out.setdefault("env", {})[env_name.strip()] = env_value.strip()
        elif key in LIST_KEYS:
            items = [value] if key == "flags" else [v.strip() for v in value.split(",") if v.strip()]
            out.setdefault(key, []).extend(items)
        else:
            out[key] = value
    return out


def as_form_text(value: dict[str, Any]) -> str:
    """A fix's change / applies_to for the edit form, in the form `_change` reads: key=value
    lines when everything fits on lines, else JSON (a diff's lines, nesting survive)."""
    if not value:
        return ""
    lines: list[str] = []
    for key, item in value.items():
        if key == "env" and isinstance(item, dict):
            lines.extend(f"env={k}={v}" for k, v in item.items())
        elif key in LIST_KEYS and isinstance(item, list) and key == "flags":
            lines.extend(f"flags={v}" for v in item)
        elif key in LIST_KEYS and isinstance(item, list):
            lines.append(f"{key}={', '.join(str(v) for v in item)}")
        else:
            lines.append(f"{key}={item}")
    text = "\n".join(lines)
    if "\n" in "".join(str(v) for v in value.values() if isinstance(v, str)) or \
            any(not isinstance(k, str) or "=" in k or k.strip() != k or not k for k in value) or \
            _change(text) != value:
        return json.dumps(value, indent=2, sort_keys=True)
    return text


_env.filters["form_text"] = as_form_text


@post("/ui/incidents/{incident_id:int}/fixes", include_in_schema=False)
async def add_fix(request: Request, state: State, incident_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    form = await form_fields(request)
    try:
        new = NewFix(title=form.get("title", ""), kind=form.get("kind", ""),
                     description=form.get("description") or None, change=_change(form.get("change", "")),
                     applies_to=_applies_to(form), author=form.get("author") or None)
        fix = await in_thread(state, curate.add_fix, db_of(state), incident_id, new)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return see_other(f"/ui/incidents/{fix.incident_id}#fix-{fix.id}", "fix-added")


@post("/ui/fixes/{fix_id:int}/edit", include_in_schema=False)
async def edit_fix(request: Request, state: State, fix_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    form = await form_fields(request)
    try:
        patch = FixPatch(title=form.get("title", ""), kind=form.get("kind", ""),
                         description=form.get("description", ""),
                         change=_change(form.get("change", "")),
                         applies_to=_change(form.get("applies_to", ""), "applies_to"))
        fix = await in_thread(state, curate.edit_fix, db_of(state), fix_id, patch)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return see_other(f"/ui/incidents/{fix.incident_id}#fix-{fix.id}", "fix-saved")


@post("/ui/fixes/{fix_id:int}/outcomes", include_in_schema=False)
async def add_outcome(request: Request, state: State, fix_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    form = await form_fields(request)
    if form.get("worked") not in ("1", "0"):
        return error_page(request, 400, "say whether the fix worked (worked=1) or not (worked=0)")
    new = NewOutcome(worked=form["worked"] == "1", note=form.get("note") or None,
                     engine=form.get("engine") or None,
                     engine_version=form.get("engine_version") or None,
                     model_arch=form.get("model_arch") or None, gpu=form.get("gpu") or None,
                     reporter=form.get("reporter") or None)
    try:
        outcome = await in_thread(state, curate.add_outcome, db_of(state), fix_id, new)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    incident_id = outcome.fix.incident_id if outcome.fix else None
    if incident_id is None:
        return see_other("/ui/incidents", "outcome")
    return see_other(f"/ui/incidents/{incident_id}#fix-{fix_id}",
                     "worked" if new.worked else "failed", fix=fix_id)


@post("/ui/incidents/{incident_id:int}/merge", include_in_schema=False)
async def merge_incident(request: Request, state: State, incident_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    form = await form_fields(request)
    try:
        into = int(form.get("into", ""))
    except ValueError:
        return error_page(request, 400, "give the number of the incident to merge into")
    try:
        target = await in_thread(state, curate.merge_incident, db_of(state), incident_id,
                                 MergeRequest(into=into))
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return see_other(f"/ui/incidents/{target.id}", "merged", merged=incident_id, into=target.id)


@post("/ui/incidents/{incident_id:int}/unmerge", include_in_schema=False)
async def unmerge_incident(request: Request, state: State, incident_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    try:
        await in_thread(state, curate.unmerge_incident, db_of(state), incident_id)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return see_other(f"/ui/incidents/{incident_id}", "unmerged", unmerged=incident_id)


# ---- sign in with a token -------------------------------------------------------------


@get("/ui/signin", include_in_schema=False)
async def signin_page(request: Request) -> Response[str]:
    return render(request, "signin.html", next=_safe_next(request.query_params.get("next")),
                  error=None)


@post("/ui/signin", include_in_schema=False)
async def signin(request: Request) -> Response[Any]:
    form = await form_fields(request)
    tokens = settings_of(request.app.state).api_tokens
    token, nxt = form.get("token", ""), _safe_next(form.get("next"))
    if tokens and not known_token(request, token):
        return render(request, "signin.html", status_code=401, next=nxt,
                      error="That token is not one of KB_API_TOKENS.")
    response = see_other(nxt, "signed-in")
    response.cookies.append(Cookie(key=TOKEN_COOKIE, value=token, path="/", httponly=True,
                                   samesite="strict", max_age=30 * 24 * 3600,
                                   secure=request.url.scheme == "https"))
    return response


@post("/ui/signout", include_in_schema=False)
async def signout(request: Request) -> Response[Any]:
    response = see_other("/ui/incidents", "signed-out")
    response.cookies.append(Cookie(key=TOKEN_COOKIE, value="", path="/", max_age=0,
                                   httponly=True, samesite="strict"))
    return response


static = create_static_files_router(path="/ui/static", directories=[HERE / "static"],
                                    include_in_schema=False, name="ui-static")

ROUTES = [home, incident_list_page, incident_detail_page, upload_page, upload_submit,
          edit_incident, add_fix, edit_fix, add_outcome, merge_incident, unmerge_incident, signin_page, signin, signout,
          static]

__all__ = ["ROUTES", "as_form_text", "sparkline"]
