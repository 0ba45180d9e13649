"""occurrences.ruleset: the detection, normalization and identity rules an upload was
analyzed with

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Existing occurrences keep NULL (analyzed by rules from before the column).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("ruleset", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("ruleset")
