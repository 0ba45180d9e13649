"""Tables of the knowledge base. One set of models for SQLite and Postgres; the Alembic
migrations in kb/db/migrations create exactly these.

- incidents: one crash cause, curated (seeded, with a slug) or created by an upload.
- incident_fingerprints: every fingerprint that routes to an incident, with the
  CrashFeatures columns matching narrows candidates on. `route_key` is unique, which
  is what makes concurrent uploads of one new crash create one incident, and merges move
  rows here so later uploads of the merged fingerprint land on the target.
- occurrences: one upload: its analysis, the redacted log (compressed) and its context.
- fixes / fix_outcomes: known remedies and what users reported when they tried them.
- incident_facets: (kind, value) pairs the list filters use (model_arch, gpu, ...).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JsonType = JSON().with_variant(JSONB(), "postgresql")
IdType = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements INTEGER only


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on both databases (SQLite drops the offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if value is not None and dialect.name == "sqlite":
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Incident(Base):
    __tablename__ = "incidents"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    slug: Mapped[str | None] = mapped_column(String(200), unique=True)
    title: Mapped[str] = mapped_column(String(500))
    notes: Mapped[str | None] = mapped_column(Text)
    tags: Mapped[list[str]] = mapped_column(JsonType, default=list)
    summary: Mapped[str | None] = mapped_column(Text)
    links: Mapped[list[str]] = mapped_column(JsonType, default=list)
    engine: Mapped[str | None] = mapped_column(String(40))
    affected_versions: Mapped[str | None] = mapped_column(String(200))
    fixed_in: Mapped[str | None] = mapped_column(String(40))
    model_archs: Mapped[list[str]] = mapped_column(JsonType, default=list)
    gpu_families: Mapped[list[str]] = mapped_column(JsonType, default=list)
    phase: Mapped[str | None] = mapped_column(String(40))
    engine_limitation: Mapped[bool] = mapped_column(Boolean, default=False)
    next_incident_id: Mapped[int | None] = mapped_column(
        ForeignKey("incidents.id", ondelete="SET NULL"))
    merged_into_id: Mapped[int | None] = mapped_column(
        ForeignKey("incidents.id", ondelete="SET NULL"), index=True)
    # The representative fingerprint (the first one seen); every fingerprint that routes
    # here, with its matching features, is in incident_fingerprints.
    fingerprint_hash: Mapped[str | None] = mapped_column(String(128), index=True)
    fingerprint_version: Mapped[str | None] = mapped_column(String(20))
    signature: Mapped[str | None] = mapped_column(Text)
    exception: Mapped[str | None] = mapped_column(String(300), index=True)
    # Context-free recommendation path, kept current so the list can filter on it.
    recommended_path: Mapped[str] = mapped_column(String(20), default="investigate")
    seeded: Mapped[bool] = mapped_column(Boolean, default=False)
    seed_digest: Mapped[str | None] = mapped_column(String(64))
    occurrence_count: Mapped[int] = mapped_column(Integer, default=0)
    # When a person last edited the incident (PATCH /incidents/{id}): `kb import` keeps
    # such an edit and reports the conflict instead of overwriting it (kb.services.packs).
    edited_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    first_seen: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_seen: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # open | resolved | regressed (kb.services.regressions): a resolved incident that
    # occurs again at or past `resolved_in` (any version when NULL) is a regression.
    status: Mapped[str] = mapped_column(String(20), default="open", server_default="open")
    resolved_in: Mapped[str | None] = mapped_column(String(60))
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    regressed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # When the last spike notification went out: at most one per incident per hour.
    spike_notified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_incidents_status", "status"),
        Index("ix_incidents_engine_phase", "engine", "phase"),
        Index("ix_incidents_last_seen", "last_seen"),
        Index("ix_incidents_recommended_path", "recommended_path"),
    )


class IncidentFingerprint(Base):
    """A fingerprint that routes to an incident, with the CrashFeatures it was made of."""

    __tablename__ = "incident_fingerprints"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"),
                                             index=True)
    version: Mapped[str] = mapped_column(String(20))
    hash: Mapped[str] = mapped_column(String(128))
    # What exact matching looks up: the fingerprint plus the engine (kb.services.matching.
    # route_key), so another engine's crash never lands on an incident by itself.
    # Unique: concurrent uploads of one new crash race here, one wins.
    route_key: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(20), default="upload")  # upload | seed
    exception: Mapped[str] = mapped_column(String(300))
    message_key: Mapped[str] = mapped_column(String(120))
    message_template: Mapped[str] = mapped_column(Text)
    frames: Mapped[list[str]] = mapped_column(JsonType, default=list)
    engine: Mapped[str | None] = mapped_column(String(40))
    engine_version: Mapped[str | None] = mapped_column(String(60))
    model_arch: Mapped[str | None] = mapped_column(String(120))
    gpu_name: Mapped[str | None] = mapped_column(String(120))
    gpu_count: Mapped[int | None] = mapped_column(Integer)
    tp: Mapped[int | None] = mapped_column(Integer)
    dp: Mapped[int | None] = mapped_column(Integer)
    pp: Mapped[int | None] = mapped_column(Integer)
    ep: Mapped[int | None] = mapped_column(Integer)
    phase: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    __table_args__ = (
        UniqueConstraint("route_key", name="uq_incident_fingerprints_route_key"),
        Index("ix_incident_fingerprints_version_hash", "version", "hash"),
        Index("ix_incident_fingerprints_exception_key", "exception", "message_key"),
        Index("ix_incident_fingerprints_exception_id", "exception", "id"),
        Index("ix_incident_fingerprints_engine_phase_id", "engine", "phase", "id"),
        Index("ix_incident_fingerprints_message_key_id", "message_key", "id"),
    )


class TemplateTerm(Base):
    """In how many stored fingerprints' message templates a term occurs: the document
    frequencies of kb.core.recall.TermWeights, kept as fingerprints are added and removed.
    The row of the empty term counts the fingerprints themselves."""

    __tablename__ = "template_terms"

    term: Mapped[str] = mapped_column(String(120), primary_key=True)
    templates: Mapped[int] = mapped_column(Integer, default=0)


class Occurrence(Base):
    __tablename__ = "occurrences"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"))
    fingerprint_hash: Mapped[str | None] = mapped_column(String(128))
    match_status: Mapped[str] = mapped_column(String(20))
    match_score: Mapped[float | None] = mapped_column(Float)
    analysis: Mapped[dict[str, Any]] = mapped_column(JsonType)
    # The redacted log text (never the raw upload), compressed by kb.db.logcodec.
    log_compressed: Mapped[bytes] = mapped_column(LargeBinary)
    log_bytes: Mapped[int] = mapped_column(Integer)
    log_lines: Mapped[int] = mapped_column(Integer)
    redactions: Mapped[int] = mapped_column(Integer, default=0)
    engine: Mapped[str | None] = mapped_column(String(40))
    engine_version: Mapped[str | None] = mapped_column(String(60))
    model: Mapped[str | None] = mapped_column(String(300))
    model_arch: Mapped[str | None] = mapped_column(String(120))
    gpu_name: Mapped[str | None] = mapped_column(String(120))
    gpu_count: Mapped[int | None] = mapped_column(Integer)
    tp: Mapped[int | None] = mapped_column(Integer)
    dp: Mapped[int | None] = mapped_column(Integer)
    pp: Mapped[int | None] = mapped_column(Integer)
    ep: Mapped[int | None] = mapped_column(Integer)
    phase: Mapped[str | None] = mapped_column(String(40))
    reporter: Mapped[str | None] = mapped_column(String(200))
    host: Mapped[str | None] = mapped_column(String(200))
    command: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    # What the launch wrapper (`kb run`) knows beyond the log: the devices it ran on, the
    # installed torch and why it uploaded (exit | hang | not_ready).
    cuda_visible_devices: Mapped[str | None] = mapped_column(String(200))
    torch_version: Mapped[str | None] = mapped_column(String(60))
    failure: Mapped[str | None] = mapped_column(String(20))
    # The rules the upload was analyzed and identified with (kb.services.ruleset): which
    # stored identities a new analyzer may move (`kb reanalyze --dry-run`). NULL: before 0006.
    ruleset: Mapped[str | None] = mapped_column(String(40))
    # The client's Idempotency-Key: a retried upload (the answer was lost) is recognised
    # by it and answered again instead of being stored twice. Unique, so two concurrent
    # retries cannot both insert; NULLs (uploads without a key) never collide.
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # What log search indexes of the redacted log: all of a small log, a bounded excerpt
    # of a large one (kb.db.logsearch). NULL: not indexed.
    search_text: Mapped[str | None] = mapped_column(Text)
    # Its words, which Postgres indexes (kb.db.logsearch.search_words). NULL on
    # SQLite, whose FTS5 table indexes search_text.
    search_vector: Mapped[str | None] = mapped_column(TSVECTOR().with_variant(Text(), "sqlite"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    __table_args__ = (
        Index("ix_occurrences_incident_created", "incident_id", "created_at"),
        # The dashboard's two weeks, read from the index alone (no row, no log blob).
        Index("ix_occurrences_created_context", "created_at", "incident_id", "engine",
              "engine_version", "model_arch", "gpu_name"),
        UniqueConstraint("idempotency_key", name="uq_occurrences_idempotency_key"),
    )


class Fix(Base):
    __tablename__ = "fixes"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"),
                                             index=True)
    title: Mapped[str] = mapped_column(String(500))
    kind: Mapped[str] = mapped_column(String(20))
    description: Mapped[str | None] = mapped_column(Text)
    change: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    applies_to: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    # Seeded fixes carry a stable key ("<slug>#<n>") so re-seeding updates only them.
    seeded: Mapped[bool] = mapped_column(Boolean, default=False)
    seed_key: Mapped[str | None] = mapped_column(String(240), unique=True)
    curated_worked: Mapped[int] = mapped_column(Integer, default=0)
    curated_failed: Mapped[int] = mapped_column(Integer, default=0)
    author: Mapped[str | None] = mapped_column(String(200))
    # When a person last edited the fix (PATCH /fixes/{id}): re-seeding never overwrites
    # the text of a seeded fix someone edited (kb.services.seeding says so instead).
    edited_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class FixOutcome(Base):
    __tablename__ = "fix_outcomes"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    fix_id: Mapped[int] = mapped_column(ForeignKey("fixes.id", ondelete="CASCADE"), index=True)
    worked: Mapped[bool] = mapped_column(Boolean)
    note: Mapped[str | None] = mapped_column(Text)
    engine: Mapped[str | None] = mapped_column(String(40))
    engine_version: Mapped[str | None] = mapped_column(String(60))
    model_arch: Mapped[str | None] = mapped_column(String(120))
    gpu: Mapped[str | None] = mapped_column(String(120))
    reporter: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class IncidentFacet(Base):
    """What an incident concerns or was seen on, as (kind, value) rows the list filters
    on with an index: kind is model_arch | gpu | gpu_family | engine_version | tag."""

    __tablename__ = "incident_facets"

    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"),
                                             primary_key=True)
    kind: Mapped[str] = mapped_column(String(20), primary_key=True)
    value: Mapped[str] = mapped_column(String(200), primary_key=True)

    __table_args__ = (Index("ix_incident_facets_kind_value", "kind", "value"),)


class IncidentMerge(Base):
    """A merge a person made, with the rows it moved: an unmerge moves exactly those back
    (wherever later merges took them), so later uploads follow the split."""

    __tablename__ = "incident_merges"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"), index=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"))
    # {"occurrences": [ids], "fixes": [ids], "fingerprints": [ids], "facets": [[kind, value]]}
    moved: Mapped[dict[str, Any]] = mapped_column(JsonType)
    # the source's own fields the merge changed: next_incident_id, recommended_path
    source_state: Mapped[dict[str, Any]] = mapped_column(JsonType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    undone_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class IncidentResolution(Base):
    """One step of an incident's resolve history: resolved (in a version, from a fix),
    reopened by a person, or regressed (an occurrence at or past the version)."""

    __tablename__ = "incident_resolutions"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"),
                                             index=True)
    action: Mapped[str] = mapped_column(String(20))  # resolved | reopened | regressed
    version: Mapped[str | None] = mapped_column(String(60))
    fix_id: Mapped[int | None] = mapped_column(ForeignKey("fixes.id", ondelete="SET NULL"))
    occurrence_id: Mapped[int | None] = mapped_column(
        ForeignKey("occurrences.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class NotificationOutbox(Base):
    """One notification for one webhook, written in the transaction that made the event
    (so it survives the process), delivered by kb.services.delivery. `target` is a hash
    of the configured URL (a Slack URL holds its token: never stored), `target_label`
    its scheme and host."""

    __tablename__ = "notification_outbox"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(36))  # shared by the event's webhooks
    event: Mapped[str] = mapped_column(String(20))  # new_incident | regression | spike
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"),
                                             index=True)
    target: Mapped[str] = mapped_column(String(32))
    target_label: Mapped[str] = mapped_column(String(300))
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # pending | delivered | failed | dropped
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # A process delivering the row holds it until then; another may take it over after.
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_notification_outbox_status_next", "status", "next_attempt_at"),)


class NotificationDelivery(Base):
    """One delivery attempt of an outbox row: the delivery log."""

    __tablename__ = "notification_deliveries"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    outbox_id: Mapped[int] = mapped_column(ForeignKey("notification_outbox.id", ondelete="CASCADE"),
                                           index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    ok: Mapped[bool] = mapped_column(Boolean)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


TABLES = ("notification_deliveries", "notification_outbox", "incident_resolutions",
          "incident_merges", "fix_outcomes", "fixes", "occurrences", "incident_facets", "incident_fingerprints",
          "incidents")
