"""incident_merges: what each merge moved, so it can be undone

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Merges made before this revision have no record: they stay merged and cannot be
unmerged (their rows were never listed). Downgrade drops the records, not the merges.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# spelled out, as in 0001: this revision never changes when the models do
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incident_merges",
        sa.Column("id", ID, nullable=False),
        sa.Column("source_id", ID, nullable=False),
        sa.Column("target_id", ID, nullable=False),
        sa.Column("moved", JSON, nullable=False),
        sa.Column("source_state", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("undone_at", TS, nullable=True),
        sa.ForeignKeyConstraint(["source_id"], ["incidents.id"], ondelete="CASCADE",
                                name=op.f("fk_incident_merges_source_id_incidents")),
        sa.ForeignKeyConstraint(["target_id"], ["incidents.id"], ondelete="CASCADE",
                                name=op.f("fk_incident_merges_target_id_incidents")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incident_merges")),
    )
    op.create_index(op.f("ix_incident_merges_source_id"), "incident_merges", ["source_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_incident_merges_source_id"), table_name="incident_merges")
    op.drop_table("incident_merges")
