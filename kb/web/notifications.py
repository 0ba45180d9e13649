"""Routes of regressions and notifications: resolve and reopen an incident (API and the
incident page's forms), the delivery log (JSON and page), and the background delivery
task each service process runs (kb.services.delivery) while KB_WEBHOOKS is set."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated as Q
from typing import Any

from litestar import Litestar, Request, Response, get, post
from litestar.datastructures import State
from litestar.params import Body, QueryParameter

from kb.services import regressions
from kb.services.delivery import Deliverer, delivery_log
from kb.services.errors import ServiceError
from kb.services.notifications import Notifier
from kb.services.views import DeliveryLog, ResolveRequest
from kb.web.api import (
    MAX_ID,
    WRITE_ERRORS,
    StoredId,
    db_of,
    errors,
    in_thread,
    require_token,
    settings_of,
)
from kb.web import links
from kb.web.links import linked
from kb.web.pages import error_page, form_fields, may_write, need_token, render, see_other

MAX_LOG = 500

# ---- the delivery task ----------------------------------------------------------------


async def start_notifications(app: Litestar) -> None:
    """The process's Notifier (what uploads write to the outbox) and, with webhooks
    configured, its delivery task."""
    settings, db = app.state.settings, app.state.db
    deliverer = Deliverer(db, settings) if settings.webhooks else None
    app.state.notifier = Notifier.from_settings(settings, wake=deliverer.wake if deliverer else None)
    app.state.delivery_task = asyncio.get_running_loop().create_task(deliverer.run()) \
        if deliverer else None


async def stop_notifications(app: Litestar) -> None:
    task = app.state.get("delivery_task")
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def notifier_of(state: State) -> Notifier | None:
    return state.get("notifier")  # type: ignore[no-any-return]


# ---- API ----------------------------------------------------------------------------

RESOLVE_DOC = (
    "Body (optional): `{\"version\": \"0.8.5\"}` resolves in that engine version; "
    "`{\"fix_id\": K}` in the version fix K upgrades to (else the incident's `fixed_in`); "
    "no body or `{}`: resolved whatever the version. A later upload on a version at or past "
    "it (or without a version, or any upload when resolved without one) reopens the "
    "incident as `regressed` and notifies; an upload on an older version does not."
)


@post("/incidents/{incident_id:int}/resolve", guards=[require_token], status_code=200,
      tags=["curation"], summary="Mark an incident resolved (optionally in a version)",
      description=RESOLVE_DOC, responses=errors(*WRITE_ERRORS, 404, 409))
async def resolve_incident(request: Request, state: State, incident_id: StoredId,
                           data: Q[ResolveRequest | None, Body()] = None) -> links.IncidentDetail:
    return linked(request, await in_thread(state, regressions.resolve, db_of(state), incident_id,
                                           data or ResolveRequest()))


@post("/incidents/{incident_id:int}/reopen", guards=[require_token], status_code=200,
      tags=["curation"], summary="Reopen a resolved or regressed incident",
      responses=errors(*WRITE_ERRORS, 404, 409))
async def reopen_incident(request: Request, state: State, incident_id: StoredId) -> links.IncidentDetail:
    return linked(request, await in_thread(state, regressions.reopen, db_of(state), incident_id))


@get("/notifications", tags=["service"], responses=errors(),
     summary="Recent notifications (new incident, regression, spike) and their deliveries")
async def notifications_log(state: State, limit: Q[int, QueryParameter(ge=1, le=MAX_LOG)] = 100
                            ) -> DeliveryLog:
    return await in_thread(state, delivery_log, db_of(state), settings_of(state), limit=limit)


# ---- pages --------------------------------------------------------------------------


@get("/ui/notifications", include_in_schema=False)
async def notifications_page(request: Request, state: State) -> Response[str]:
    try:
        log = await in_thread(state, delivery_log, db_of(state), settings_of(state), limit=100)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return render(request, "notifications.html", log=log,
                  spike_per_hour=settings_of(state).spike_per_hour)


@post("/ui/incidents/{incident_id:int}/resolve", include_in_schema=False)
async def resolve_page(request: Request, state: State, incident_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    form = await form_fields(request)
    fix = form.get("fix_id") or ""
    if fix and not (fix.isascii() and fix.isdigit() and 0 < int(fix) <= MAX_ID):
        return error_page(request, 400, "fix_id must be the number of a fix")
    resolve = ResolveRequest(version=form.get("version") or None, fix_id=int(fix) if fix else None)
    try:
        await in_thread(state, regressions.resolve, db_of(state), incident_id, resolve)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return see_other(f"/ui/incidents/{incident_id}#status-h", "resolved")


@post("/ui/incidents/{incident_id:int}/reopen", include_in_schema=False)
async def reopen_page(request: Request, state: State, incident_id: StoredId) -> Response[Any]:
    if not may_write(request):
        return need_token(request)
    try:
        await in_thread(state, regressions.reopen, db_of(state), incident_id)
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    return see_other(f"/ui/incidents/{incident_id}#status-h", "reopened")


ROUTES: list[Any] = [resolve_incident, reopen_incident, notifications_log, notifications_page,
                     resolve_page, reopen_page]

__all__ = ["ROUTES", "notifier_of", "start_notifications", "stop_notifications"]
