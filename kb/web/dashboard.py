"""The team dashboard: GET /dashboard (JSON, the text report for a terminal, or for a
browser the page) and /ui/dashboard, the page rendering the same struct with its charts
drawn server-side (kb.web.charts)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State

from kb.services import dashboard as dashboard_service
from kb.services.errors import ServiceError
from kb.web import charts, links
from kb.web.answerforms import NegotiatedOperation
from kb.web.api import Format, db_of, errors, in_thread, negotiated
from kb.web.links import linked
from kb.web.pages import error_page, render


def dashboard_report(data: dict[str, Any], *, base_url: str) -> str:
    """The dashboard for a terminal: the week's counts, the top incidents, the breakdowns."""
    lines = [f"Crash KB dashboard: {data['start']} to {data['end']} (UTC)",
             f"  {data['occurrences_this_week']} occurrence(s) this week, "
             f"{data['occurrences_previous_week']} the week before; "
             f"{len(data['new_incidents'])} new incident(s), "
             f"{len(data['recurring_incidents'])} recurring", ""]
    lines.append("Top incidents this week")
    for row in data["top"] or []:
        lines.append(f"  #{row['id']:<5} {row['this_week']:>4} ({row['change']:+d}, {row['trend']})  "
                     f"{row['title'][:70]}")
    if not data["top"]:
        lines.append("  no crash uploaded this week")
    for key, title in (("by_engine_version", "By engine version"), ("by_gpu_family", "By GPU family"),
                       ("by_model_arch", "By model architecture")):
        if data[key]:
            lines += ["", title]
            lines += [f"  {b['label']:<24} {b['this_week']:>4} (previous week {b['previous_week']}), "
                      f"{b['incident_count']} incident(s)" for b in data[key]]
    lines += ["", f"{base_url}/ui/dashboard"]
    return "\n".join(lines) + "\n"


@get("/dashboard", tags=["incidents"], responses=errors(), operation_class=NegotiatedOperation,
     summary="This week's crashes: top incidents and their trend, breakdowns, new vs recurring",
     description="This week is the last 7 UTC days, today included, compared with the 7 "
                 "days before. `regressions` stays empty until incidents record regressions.")
async def get_dashboard(request: Request, state: State, format: Format = None) -> Response[links.Dashboard]:
    data = await in_thread(state, dashboard_service.dashboard, db_of(state))
    return negotiated(request, format, linked(request, data), dashboard_report, page="/ui/dashboard")


def chart_data(data: links.Dashboard) -> dict[str, Any]:
    """The charts of the page, from the struct the JSON returns."""
    return {
        "daily": charts.daily_columns([d.day for d in data.daily], [d.occurrences for d in data.daily],
                                      current_from=data.days),
        "versions": charts.bucket_bars(data.by_engine_version),
        "gpus": charts.bucket_bars(data.by_gpu_family),
        "archs": charts.bucket_bars(data.by_model_arch),
        "split": charts.split_bar(len(data.new_incidents), len(data.recurring_incidents)),
        "series": {r.id: charts.series_line(r.daily, data.days)
                   for r in [*data.top, *data.growing, *data.regressions]},
    }


@get("/ui/dashboard", include_in_schema=False)
async def dashboard_page(request: Request, state: State) -> Response[str]:
    try:
        found = await in_thread(state, dashboard_service.dashboard, db_of(state))
    except ServiceError as exc:
        return error_page(request, exc.status_code, exc.detail)
    data: links.Dashboard = linked(request, found)
    return render(request, "dashboard.html", d=data, c=chart_data(data))


ROUTES = [get_dashboard, dashboard_page]
