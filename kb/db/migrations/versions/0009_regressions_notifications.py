"""Regressions and notifications: an incident's resolve state and history, the outbox of
notifications and the log of their deliveries

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

Existing incidents start `open`, never resolved.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from sqlalchemy.dialects import postgresql

# spelled out, as in 0001: this revision never changes when the models do
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("status", sa.String(length=20), nullable=False,
                                   server_default="open"))
        batch.add_column(sa.Column("resolved_in", sa.String(length=60), nullable=True))
        batch.add_column(sa.Column("resolved_at", TS, nullable=True))
        batch.add_column(sa.Column("regressed_at", TS, nullable=True))
        batch.add_column(sa.Column("spike_notified_at", TS, nullable=True))
        batch.create_index("ix_incidents_status", ["status"])
    op.create_table(
        "incident_resolutions",
        sa.Column("id", ID, nullable=False),
        sa.Column("incident_id", ID, sa.ForeignKey(
            "incidents.id", ondelete="CASCADE",
            name="fk_incident_resolutions_incident_id_incidents"), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("version", sa.String(length=60), nullable=True),
        sa.Column("fix_id", ID, sa.ForeignKey(
            "fixes.id", ondelete="SET NULL", name="fk_incident_resolutions_fix_id_fixes"),
            nullable=True),
        sa.Column("occurrence_id", ID, sa.ForeignKey(
            "occurrences.id", ondelete="SET NULL",
            name="fk_incident_resolutions_occurrence_id_occurrences"), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_incident_resolutions"),
    )
    op.create_index("ix_incident_resolutions_incident_id", "incident_resolutions", ["incident_id"])
    op.create_table(
        "notification_outbox",
        sa.Column("id", ID, nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("event", sa.String(length=20), nullable=False),
        sa.Column("incident_id", ID, sa.ForeignKey(
            "incidents.id", ondelete="CASCADE",
            name="fk_notification_outbox_incident_id_incidents"), nullable=False),
        sa.Column("target", sa.String(length=32), nullable=False),
        sa.Column("target_label", sa.String(length=300), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("locked_until", TS, nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("delivered_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_notification_outbox"),
    )
    op.create_index("ix_notification_outbox_incident_id", "notification_outbox", ["incident_id"])
    op.create_index("ix_notification_outbox_status_next", "notification_outbox",
                    ["status", "next_attempt_at"])
    op.create_table(
        "notification_deliveries",
        sa.Column("id", ID, nullable=False),
        sa.Column("outbox_id", ID, sa.ForeignKey(
            "notification_outbox.id", ondelete="CASCADE",
            name="fk_notification_deliveries_outbox_id_notification_outbox"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notification_deliveries"),
    )
    op.create_index("ix_notification_deliveries_outbox_id", "notification_deliveries", ["outbox_id"])


def downgrade() -> None:
    op.drop_table("notification_deliveries")
    op.drop_table("notification_outbox")
    op.drop_table("incident_resolutions")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_index("ix_incidents_status")
        batch.drop_column("spike_notified_at")
        batch.drop_column("regressed_at")
        batch.drop_column("resolved_at")
        batch.drop_column("resolved_in")
        batch.drop_column("status")
