"""The typed structs services return. They name incidents and occurrences by id: the
web layer adds the links (`url`, `log_url`) when it answers (kb.web.links), and the
JSON API and the HTML pages render the same linked form, so an answer looks the same
in both. Keys are only ever added, never renamed (other tools read them)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import date, datetime
from typing import Annotated, Any, Literal

import msgspec

from kb.core.recommend import FIX_KINDS

FixKind = Literal[FIX_KINDS]  # type: ignore[valid-type]  # the schema's enum; services check it too


@dataclass(slots=True)
class IncidentRef:
    id: int
    title: str
    occurrences: int
    first_seen: datetime | None
    last_seen: datetime | None
    slug: str | None = None


@dataclass(slots=True)
class OccurrenceRef:
    id: int


@dataclass(slots=True)
class MatchView:
    status: str  # known | similar | new
    incident_id: int | None
    score: float
    explanation: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SimilarView:
    incident_id: int
    score: float
    title: str
    seeded: bool = False  # curated: merge this one into it, never it into another


@dataclass(slots=True)
class FixView:
    id: int
    incident_id: int
    title: str
    kind: str
    description: str | None
    change: dict[str, Any]
    applies_to: dict[str, Any]
    worked: int
    failed: int
    worked_here: int = 0  # outcomes on the same engine version and model arch as the crash
    failed_here: int = 0
    seeded: bool = False
    edited_at: datetime | None = None  # last edit by a person (PATCH /fixes/{id})
    # `worked`/`failed` split by where the evidence comes from: what the upstream threads
    # a seed cites report (curated counts), and this team's own recorded outcomes.
    upstream_worked: int = 0
    upstream_failed: int = 0
    team_worked: int = 0
    team_failed: int = 0


@dataclass(slots=True)
class RecommendationView:
    path: str  # patch | switch_engine | investigate
    fix_id: int | None
    reason: str
    engine: str | None = None
    engine_version: str | None = None


@dataclass(slots=True)
class UploadResult:
    """Answer of POST /incidents (stored) and POST /analyze (`incident`/`occurrence`
    are the matched incident and None when nothing is stored)."""

    incident: IncidentRef | None
    occurrence: OccurrenceRef | None
    analysis: dict[str, Any]
    match: MatchView
    similar: list[SimilarView]
    fixes: list[FixView]
    recommendation: RecommendationView
    created: bool = False  # a new incident was created (HTTP 201)
    # A repeated Idempotency-Key: the answer of the upload stored first, nothing stored now.
    replayed: bool = False


@dataclass(slots=True)
class Timeline:
    """Occurrences per UTC day, oldest first: counts[0] is `start`, the last is today."""

    start: date
    days: int
    counts: list[int]


@dataclass(slots=True)
class LogMatchView:
    """The line of a stored log that a search matched, and the upload it is from."""

    occurrence_id: int
    line: str


@dataclass(slots=True)
class CountView:
    value: str | None  # None: the uploads did not say
    count: int


@dataclass(slots=True)
class OccurrenceBreakdown:
    """An incident's occurrences counted by where they happened, most first."""

    engine_versions: list[CountView] = field(default_factory=list)
    gpus: list[CountView] = field(default_factory=list)
    models: list[CountView] = field(default_factory=list)


@dataclass(slots=True)
class IncidentSummary:
    """A row of the incident list."""

    id: int
    title: str
    slug: str | None
    signature: str | None
    engine: str | None
    phase: str | None
    tags: list[str]
    occurrences: int
    fixes: int
    recommended_path: str
    engine_limitation: bool
    seeded: bool
    first_seen: datetime | None
    last_seen: datetime | None
    # What the occurrences (and curated seeds) say it was seen on, sorted.
    versions: list[str] = field(default_factory=list)
    model_archs: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    timeline: Timeline | None = None
    # With `q`: where its stored logs matched (kb.db.logsearch); None when only its
    # title, signature or notes matched, or without `q`.
    log_match: LogMatchView | None = None
    status: str = "open"  # open | resolved | regressed


@dataclass(slots=True)
class IncidentList:
    items: list[IncidentSummary]
    total: int
    page: int
    per_page: int
    filters: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class OccurrenceView:
    id: int
    created_at: datetime
    match_status: str
    match_score: float | None
    fingerprint_hash: str | None
    engine: str | None
    engine_version: str | None
    model: str | None
    model_arch: str | None
    gpu_name: str | None
    gpu_count: int | None
    tp: int | None
    dp: int | None
    pp: int | None
    ep: int | None
    phase: str | None
    reporter: str | None
    host: str | None
    command: str | None
    exit_code: int | None
    log_bytes: int
    log_lines: int
    cuda_visible_devices: str | None = None
    torch_version: str | None = None
    failure: str | None = None  # exit | hang | not_ready (sent by `kb run`)
    ruleset: str | None = None  # the rules it was analyzed with (kb.services.ruleset)


@dataclass(slots=True)
class LinkedIncident:
    id: int
    title: str
    engine_limitation: bool = False


@dataclass(slots=True)
class FingerprintView:
    version: str
    hash: str
    source: str
    exception: str
    message_template: str
    frames: list[str]
    engine: str | None
    engine_version: str | None
    model_arch: str | None


@dataclass(slots=True)
class MergeView:
    """A merge a person made (and, when `undone_at` is set, undid), or occurrences `kb
    reanalyze` moved (`by` "reanalysis": the installed rules' doing, `ruleset` theirs)."""

    id: int
    source_id: int
    target_id: int
    created_at: datetime
    undone_at: datetime | None = None
    by: str = "person"
    ruleset: str | None = None
    occurrences: int = 0  # how many occurrences it moved


@dataclass(slots=True)
class ResolutionView:
    """One step of an incident's resolve history."""

    action: str  # resolved | reopened | regressed
    created_at: datetime
    version: str | None = None  # resolved in (resolved), the occurrence's (regressed)
    fix_id: int | None = None
    occurrence_id: int | None = None


@dataclass(slots=True)
class IncidentDetail:
    id: int
    slug: str | None
    title: str
    notes: str | None
    tags: list[str]
    summary: str | None
    links: list[str]
    engine: str | None
    affected_versions: str | None
    fixed_in: str | None
    model_archs: list[str]
    gpu_families: list[str]
    phase: str | None
    engine_limitation: bool
    seeded: bool
    signature: str | None
    exception: str | None
    fingerprint_hash: str | None
    fingerprint_version: str | None
    occurrence_count: int
    first_seen: datetime | None
    last_seen: datetime | None
    created_at: datetime
    updated_at: datetime
    merged_into: LinkedIncident | None
    next: LinkedIncident | None
    chain: list[LinkedIncident]  # the crashes known to follow once this one is fixed
    previous: list[LinkedIncident]  # incidents whose fix leads here
    fingerprints: list[FingerprintView]
    occurrences: list[OccurrenceView]
    fixes: list[FixView]
    similar: list[SimilarView]
    recommendation: RecommendationView
    # The stored analysis (`kb analyze --json`) of the newest occurrence: root-cause
    # traceback, wrapper errors, timing. None for incidents never uploaded (seeds).
    analysis: dict[str, Any] | None = None
    merges: list[MergeView] = field(default_factory=list)  # into or out of this incident
    breakdown: OccurrenceBreakdown = field(default_factory=OccurrenceBreakdown)
    edited_at: datetime | None = None  # last edit by a person (PATCH /incidents/{id})
    # open | resolved | regressed (kb.services.regressions), and the history, oldest first
    status: str = "open"
    resolved_in: str | None = None
    resolved_at: datetime | None = None
    regressed_at: datetime | None = None
    resolutions: list[ResolutionView] = field(default_factory=list)


@dataclass(slots=True)
class OutcomeView:
    id: int
    fix_id: int
    worked: bool
    note: str | None
    engine: str | None
    engine_version: str | None
    model_arch: str | None
    gpu: str | None
    reporter: str | None
    created_at: datetime
    fix: FixView | None = None


@dataclass(slots=True)
class Health:
    status: str
    database: str
    version: str
    schema_revision: str | None = None


# ---- the dashboard (kb.services.dashboard) -----------------------------------------


@dataclass(slots=True)
class DashboardIncident:
    """An incident seen in the two weeks: its counts and its daily series."""

    id: int
    title: str
    slug: str | None
    engine: str | None
    this_week: int
    previous_week: int
    change: int  # this_week - previous_week
    trend: str  # new | grew | fell | steady
    daily: list[int]  # 2 * WEEK_DAYS days, oldest first: the previous week, then this one
    first_seen: datetime | None
    recommended_path: str
    engine_limitation: bool = False


@dataclass(slots=True)
class BucketIncident:
    id: int
    title: str
    occurrences: int


@dataclass(slots=True)
class Bucket:
    """A row of a breakdown: `label` as shown (`vllm 0.10.1`, `hopper`, `qwen3`), the
    occurrences of this week and the previous one, the distinct incidents this week and
    the ones it brought most."""

    label: str
    this_week: int
    previous_week: int
    incident_count: int
    incidents: list[BucketIncident] = field(default_factory=list)


@dataclass(slots=True)
class DailyCount:
    day: date
    occurrences: int


@dataclass(slots=True)
class Dashboard:
    start: date  # first day of this week
    end: date  # today (UTC), the last day counted
    previous_start: date
    days: int  # days per week (WEEK_DAYS)
    occurrences_this_week: int
    occurrences_previous_week: int
    daily: list[DailyCount]  # every occurrence of both weeks, per day, oldest first
    top: list[DashboardIncident]  # the most frequent this week
    growing: list[DashboardIncident]  # grew most since the previous week (new ones included)
    new_incidents: list[DashboardIncident]  # first seen this week
    recurring_incidents: list[DashboardIncident]  # seen this week, first seen before it
    by_engine_version: list[Bucket]
    by_gpu_family: list[Bucket]
    by_model_arch: list[Bucket]
    # Resolved incidents that occurred again (kb.services.regressions), seen in these weeks
    regressions: list[DashboardIncident] = field(default_factory=list)


# ---- inputs (JSON bodies) ----------------------------------------------------------


@dataclass(slots=True)
class Overrides:
    """Form fields that override what the log says (the uploader knows better). Here,
    apart from the service, so the Python client takes the same fields."""

    engine: str | None = None
    engine_version: str | None = None
    model: str | None = None
    model_arch: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    tp: int | None = None
    dp: int | None = None
    pp: int | None = None
    ep: int | None = None
    command: str | None = None
    exit_code: int | None = None
    host: str | None = None
    reporter: str | None = None
    # Sent by the launch wrapper; kept with the occurrence (the log does not say them).
    cuda_visible_devices: str | None = None
    torch_version: str | None = None
    failure: str | None = None  # exit | hang | not_ready


OVERRIDE_FIELDS = tuple(f.name for f in fields(Overrides))


# A title of an incident or a fix: not blank (the schema says so; the services check it too)
Title = Annotated[str, msgspec.Meta(pattern=r"\S")]


@dataclass(slots=True)
class IncidentPatch:
    """PATCH /incidents/{id}: the fields given are changed, the others kept. The curated
    fields of the seed schema too: `next` (the id or slug of the crash that follows once
    this one is fixed; 0 or "" clears it), `affected_versions` (a PEP 440 range) and
    `fixed_in` (a PEP 440 version), "" clearing either, and `engine_limitation`."""

    title: Title | None = None
    notes: str | None = None
    tags: list[str] | None = None
    next: int | str | None = None
    affected_versions: str | None = None
    fixed_in: str | None = None
    engine_limitation: bool | None = None


@dataclass(slots=True)
class NewFix:
    title: Title
    kind: FixKind
    description: str | None = None
    change: dict[str, Any] = field(default_factory=dict)
    applies_to: dict[str, Any] = field(default_factory=dict)
    author: str | None = None


@dataclass(slots=True)
class FixPatch:
    """PATCH /fixes/{id}: the fields given are changed, the others kept."""

    title: Title | None = None
    kind: FixKind | None = None
    description: str | None = None
    change: dict[str, Any] | None = None
    applies_to: dict[str, Any] | None = None


@dataclass(slots=True)
class NewOutcome:
    worked: bool
    note: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    model_arch: str | None = None
    gpu: str | None = None
    reporter: str | None = None


# A stored row's id in a body: the range the databases' 64-bit keys hold, as in paths.
StoredRowId = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]


@dataclass(slots=True)
class MergeRequest:
    into: StoredRowId


@dataclass(slots=True)
class ListQuery:
    """GET /incidents parameters."""

    q: str | None = None
    engine: str | None = None
    version: str | None = None
    model_arch: str | None = None
    gpu: str | None = None
    phase: str | None = None
    has_fix: bool | None = None
    path: str | None = None
    tag: str | None = None
    sort: str = "last_seen"  # relevance | last_seen | occurrences | created | id | title
    view: str | None = None  # seen_here | seeded | needs_triage
    status: str | None = None  # open | resolved | regressed
    page: int = 1
    per_page: int = 50


@dataclass(slots=True)
class ResolveRequest:
    """POST /incidents/{id}/resolve: resolved in `version`, or in the version the fix
    `fix_id` upgrades to; neither: resolved whatever the version."""

    version: Annotated[str, msgspec.Meta(max_length=60)] | None = None
    fix_id: StoredRowId | None = None


@dataclass(slots=True)
class DeliveryView:
    """One delivery attempt of a notification, with the notification's state."""

    id: int
    notification_id: int
    event: str  # new_incident | regression | spike
    event_id: str
    incident_id: int
    target: str  # the webhook's scheme and host (its URL is a secret)
    attempt: int
    ok: bool
    status_code: int | None
    error: str | None
    duration_ms: float
    created_at: datetime
    notification_status: str  # pending | delivered | failed | dropped


@dataclass(slots=True)
class NotificationView:
    """A notification for one webhook and where its delivery stands."""

    id: int
    event: str
    event_id: str
    incident_id: int
    target: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


@dataclass(slots=True)
class DeliveryLog:
    """GET /notifications: the newest notifications and delivery attempts."""

    webhooks: list[str]  # the configured webhooks, as scheme and host
    notifications: list[NotificationView]
    deliveries: list[DeliveryView]
