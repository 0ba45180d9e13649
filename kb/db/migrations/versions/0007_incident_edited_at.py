"""incidents.edited_at: when a person last edited an incident (PATCH /incidents/{id}, the
incident page), so `kb import` keeps a local edit instead of overwriting it silently

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

Existing incidents keep NULL (no edit recorded). Types are spelled out here, not imported
from kb.db.models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

TS = sa.DateTime(timezone=True)

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("edited_at", TS, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("edited_at")
