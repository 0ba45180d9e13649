"""The team's weekly overview: which crashes grew this week, which engine versions, GPU
families and model architectures bring which crashes, and which incidents are new.

"This week" is the last WEEK_DAYS UTC days, today included; "the previous week" the
WEEK_DAYS before them. Everything is counted from the occurrences (uploads) of those two
weeks, so a merge (which moves occurrences) is reflected at once. GET /dashboard returns
the Dashboard struct (kb.services.views); the /ui/dashboard page renders the same struct.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from kb.core.gpus import gpu_family
from kb.db import dashboard as dashboard_queries
from kb.db.session import Database
from kb.services.views import Bucket, BucketIncident, DailyCount, Dashboard, DashboardIncident

WEEK_DAYS = 7
TOP_INCIDENTS = 10
BUCKETS = 12  # rows of a breakdown; the rest are summed into "other"
BUCKET_INCIDENTS = 3  # the incidents named per breakdown row
UNKNOWN = "unknown"


def _window(today: date) -> tuple[date, date, datetime, datetime]:
    start = today - timedelta(days=WEEK_DAYS - 1)
    previous_start = start - timedelta(days=WEEK_DAYS)
    since = datetime.combine(previous_start, datetime.min.time(), UTC)
    until = datetime.combine(today + timedelta(days=1), datetime.min.time(), UTC)
    return start, previous_start, since, until


def _trend(this_week: int, previous_week: int, first_seen: datetime | None, start: date) -> str:
    if first_seen is not None and first_seen.astimezone(UTC).date() >= start:
        return "new"
    if this_week > previous_week:
        return "grew"
    if this_week < previous_week:
        return "fell"
    return "steady"


@lru_cache(maxsize=4096)
def _gpu_label(name: str | None) -> str:
    """The family a GPU name belongs to (few names, many rows: remembered)."""
    if not name:
        return UNKNOWN
    return gpu_family(name) or "other"


def _buckets(counts: dict[str, dict[int, list[int]]], titles: dict[int, str]) -> list[Bucket]:
    """counts[label][incident] = [this week, previous week] -> the rows, most this week first."""
    rows = []
    for label, per_incident in counts.items():
        this_week = sum(c[0] for c in per_incident.values())
        previous = sum(c[1] for c in per_incident.values())
        named = sorted(((c[0], i) for i, c in per_incident.items() if c[0]), reverse=True)
        rows.append(Bucket(label=label, this_week=this_week, previous_week=previous,
                           incident_count=sum(1 for c in per_incident.values() if c[0]),
                           incidents=[BucketIncident(i, titles[i], n)
                                      for n, i in named[:BUCKET_INCIDENTS] if i in titles]))
    rows.sort(key=lambda b: (-b.this_week, -b.previous_week, b.label == UNKNOWN, b.label))
    rows = [b for b in rows if b.this_week or b.previous_week]
    if len(rows) > BUCKETS:
        rest = rows[BUCKETS - 1:]
        rows = rows[:BUCKETS - 1] + [Bucket(
            label=f"{len(rest)} more", this_week=sum(b.this_week for b in rest),
            previous_week=sum(b.previous_week for b in rest),
            incident_count=sum(b.incident_count for b in rest))]
    return rows


def dashboard(db: Database, *, today: date | None = None) -> Dashboard:
    """The overview of this week against the previous one (`today`: tests)."""
    today = today or datetime.now(UTC).date()
    start, previous_start, since, until = _window(today)
    with db.read() as session:
        groups = dashboard_queries.occurrence_groups(session, since, until)
        incidents = dashboard_queries.incident_rows(session, {g.incident_id for g in groups})
    days = 2 * WEEK_DAYS
    daily_total = [0] * days
    daily: dict[int, list[int]] = defaultdict(lambda: [0] * days)
    splits: dict[str, dict[str, dict[int, list[int]]]] = {
        "version": defaultdict(lambda: defaultdict(lambda: [0, 0])),
        "gpu": defaultdict(lambda: defaultdict(lambda: [0, 0])),
        "arch": defaultdict(lambda: defaultdict(lambda: [0, 0])),
    }
    for g in groups:
        index = (g.day - previous_start).days
        if not 0 <= index < days:
            continue
        daily_total[index] += g.count
        daily[g.incident_id][index] += g.count
        week = 0 if g.day >= start else 1
        version = " ".join(v for v in (g.engine, g.engine_version) if v) or UNKNOWN
        for kind, label in (("version", version), ("gpu", _gpu_label(g.gpu_name)),
                            ("arch", (g.model_arch or "").lower() or UNKNOWN)):
            splits[kind][label][g.incident_id][week] += g.count

    rows: list[DashboardIncident] = []
    for incident_id, series in daily.items():
        row = incidents.get(incident_id)
        if row is None:
            continue
        this_week, previous = sum(series[WEEK_DAYS:]), sum(series[:WEEK_DAYS])
        rows.append(DashboardIncident(
            id=row.id, title=row.title, slug=row.slug,
            engine=row.engine, this_week=this_week, previous_week=previous,
            change=this_week - previous, trend=_trend(this_week, previous, row.first_seen, start),
            daily=series, first_seen=row.first_seen, recommended_path=row.recommended_path,
            engine_limitation=row.engine_limitation))
    active = sorted((r for r in rows if r.this_week), key=lambda r: (-r.this_week, -r.change, r.id))
    titles = {r.id: r.title for r in rows}
    return Dashboard(
        start=start, end=today, previous_start=previous_start, days=WEEK_DAYS,
        occurrences_this_week=sum(daily_total[WEEK_DAYS:]),
        occurrences_previous_week=sum(daily_total[:WEEK_DAYS]),
        daily=[DailyCount(previous_start + timedelta(days=n), c) for n, c in enumerate(daily_total)],
        top=active[:TOP_INCIDENTS],
        growing=sorted((r for r in active if r.change > 0), key=lambda r: (-r.change, r.id))[:TOP_INCIDENTS],
        new_incidents=[r for r in active if r.trend == "new"],
        recurring_incidents=[r for r in active if r.trend != "new"],
        by_engine_version=_buckets(splits["version"], titles),
        by_gpu_family=_buckets(splits["gpu"], titles),
        by_model_arch=_buckets(splits["arch"], titles),
        regressions=sorted((r for r in rows if incidents[r.id].status == "regressed"),
                           key=lambda r: (-r.this_week, r.id)))


__all__ = ["Bucket", "BucketIncident", "DailyCount", "Dashboard", "DashboardIncident", "dashboard"]
