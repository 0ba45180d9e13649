"""The Litestar application: routes, settings and database on app.state, and the one
place where service and storage errors become HTTP answers."""

from __future__ import annotations

import importlib
import logging
from urllib.parse import urlencode
from typing import Any

import anyio
from litestar import Litestar, MediaType, Request, Response
from litestar.datastructures import MutableScopeHeaders, State
from litestar.types import Message, Scope
from litestar.exceptions import HTTPException
from litestar.response import Redirect
from sqlalchemy import exc as sa_exc

from kb import textreport
from kb.config import Settings
from kb.db.session import Database
from kb.services.errors import ServiceError
from kb.web import api, apidocs
from kb.web.allowheader import complete_allow_header
from kb.web.budget import ByteBudget, map_large_buffers
from kb.web.crossorigin import SignInRequired, allowed_host_names, refuse_other_sites
from kb.web.negotiate import FORMATS, VARY, answer_format
from kb.web.notifications import start_notifications, stop_notifications
from kb.web.supervision import die_with_parent

log = logging.getLogger("kb.web")

RETRY_AFTER_SECONDS = 5
# Storage failures that mean "the database is not answering": retry later.
UNAVAILABLE = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError,
               sa_exc.DisconnectionError)


def _error(request: Request, status: int, detail: str, headers: dict[str, str] | None = None,
           extra: Any = None) -> Response[Any]:
    """An error answer: JSON `{status_code, detail, extra}`, or its text for a terminal
    (the same negotiation as the answers, kb/web/negotiate.py; a page's own errors are
    pages, kb/web/pages.py)."""
    headers = {**(headers or {}), "Vary": VARY}
    if request.url.path.startswith("/ui/"):  # a page's error is a page
        from kb.web.pages import error_page

        page = error_page(request, status, detail)
        page.headers.update(headers)
        return page
    explicit = request.query_params.get("format")
    form = answer_format(explicit if explicit in FORMATS else None,  # type: ignore[arg-type]
                         request.headers.get("accept"), request.headers.get("user-agent"))
    if form == "text":
        text = textreport.error_report(status, detail)
        for item in extra if isinstance(extra, list) else [extra] if extra else []:
            if isinstance(item, dict) and item.get("message"):
                item = f"{item.get('key') or item.get('source') or 'input'}: {item['message']}"
            text += f"  {item}\n"
        return Response(text, status_code=status, headers=headers,
                        media_type=MediaType.TEXT)
    body: dict[str, Any] = {"status_code": status, "detail": detail}
    if extra:
        body["extra"] = extra  # e.g. which JSON field failed validation
    return Response(body, status_code=status, headers=headers, media_type=MediaType.JSON)


def on_service_error(request: Request, exc: ServiceError) -> Response[Any]:
    field = getattr(exc, "field", None)
    extra = [{"key": field, "message": exc.detail, "source": "body"}] if field else None
    retry = {"Retry-After": str(RETRY_AFTER_SECONDS)} if exc.status_code == 503 else None
    return _error(request, exc.status_code, exc.detail, retry, extra=extra)


def on_storage_error(request: Request, exc: Exception) -> Response[Any]:
    if isinstance(exc, UNAVAILABLE) or (isinstance(exc, sa_exc.DBAPIError)
                                        and exc.connection_invalidated):
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return _error(request, 503, "the database is unavailable; nothing was stored, retry later",
                      {"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(exc, sa_exc.DataError):
        return _error(request, 400, "a value is out of range for the database")
    log.exception("storage error on %s %s", request.method, request.url.path)
    return _error(request, 500, "internal storage error")


def on_http_exception(request: Request, exc: HTTPException) -> Response[Any]:
    if isinstance(exc, SignInRequired):
        return Redirect(f"/ui/signin?{urlencode({'next': exc.next})}", status_code=303)
    return _error(request, exc.status_code, exc.detail, dict(exc.headers or {}) or None,
                  getattr(exc, "extra", None))


# Pages carry no inline script or style (kb/web/templates): the policy forbids both, and
# framing. The API docs page (Swagger UI) starts itself with an inline script.
PAGE_POLICY = ("default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
               "base-uri 'none'; form-action 'self'")
DOCS_POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
               "img-src 'self' data:; frame-ancestors 'none'")


async def security_headers(message: Message, scope: Scope) -> None:
    """Every answer: no MIME sniffing (a stored log is served as text/plain and must stay
    text), no framing, no referrer to other sites; HTML also gets a content policy (the
    docs page its own). Set as the response starts, where the path is known."""
    if message["type"] != "http.response.start":
        return
    headers = MutableScopeHeaders.from_message(message)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")
    if (headers.get("content-type") or "").startswith("text/html"):
        docs = str(scope.get("path", "")).startswith("/schema")
        headers.setdefault("Content-Security-Policy", DOCS_POLICY if docs else PAGE_POLICY)


def _optional_routes(module_name: str) -> list[Any]:
    """Routes of modules other parts of the project add (the HTML pages)."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return []
        raise
    return list(getattr(module, "ROUTES", []))


def create_app(settings: Settings | None = None, db: Database | None = None) -> Litestar:
    """The app for `settings` (default: from KB_* variables). The database is not
    touched here: an unreachable database makes requests answer 503, not the start fail."""
    settings = settings or Settings.from_env()
    owns_db = db is None
    db = db or Database(settings.database_url, pool_size=settings.db_pool_size)

    async def on_startup(app: Litestar) -> None:
        app.state.limiter = anyio.CapacityLimiter(settings.threads)
        app.state.budget = ByteBudget(settings.max_inflight_mb * 1024 * 1024, settings.upload_queue_seconds)
        map_large_buffers()
        die_with_parent()
        await start_notifications(app)

    async def on_shutdown(app: Litestar) -> None:
        await stop_notifications(app)
        if app.state.get("owns_db"):
            app.state.db.dispose()

    return Litestar(
        route_handlers=[*api.ROUTES, *apidocs.ROUTES, *_optional_routes("kb.web.pages"),
                        *_optional_routes("kb.web.dashboard"), *_optional_routes("kb.web.packs"),
                        *_optional_routes("kb.web.notifications")],
        guards=[refuse_other_sites],
        before_send=[security_headers, complete_allow_header],
        state=State({"settings": settings, "db": db, "owns_db": owns_db,
                     "allowed_host_names": allowed_host_names(settings)}),
        on_startup=[on_startup],
        on_shutdown=[on_shutdown],
        exception_handlers={
            ServiceError: on_service_error,
            sa_exc.SQLAlchemyError: on_storage_error,
            HTTPException: on_http_exception,
        },
        openapi_config=apidocs.openapi_config(),
        debug=False,
    )
