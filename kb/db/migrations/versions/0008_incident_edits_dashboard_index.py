"""incidents.edited_at, and an index on occurrences.created_at

- incidents.edited_at: when a person last edited an incident (PATCH /incidents/{id}, the
  incident page), so `kb import` keeps a local edit instead of overwriting it silently;
- ix_occurrences_created_context: the dashboard reads the occurrences of the last two
  weeks, with the context it splits them by, from this index alone.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

Existing incidents keep NULL (no edit recorded). Types are spelled out here, not imported
from kb.db.models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

TS = sa.DateTime(timezone=True)

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("edited_at", TS, nullable=True))
    op.create_index("ix_occurrences_created_context", "occurrences",
                    ["created_at", "incident_id", "engine", "engine_version", "model_arch", "gpu_name"])


def downgrade() -> None:
    op.drop_index("ix_occurrences_created_context", table_name="occurrences")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("edited_at")
