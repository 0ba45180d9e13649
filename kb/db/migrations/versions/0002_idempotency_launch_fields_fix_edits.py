"""idempotency key and launch fields on occurrences, edit time on fixes

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

- occurrences.idempotency_key (unique, nullable): a retried upload is answered again
  instead of being stored twice;
- occurrences.cuda_visible_devices / torch_version / failure: what `kb run` sends;
- fixes.edited_at: re-seeding does not overwrite a seeded fix a person edited.

Batch mode (SQLite rebuilds the table; Postgres alters it in place). Types are spelled
out here, not imported from kb.db.models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

TS = sa.DateTime(timezone=True)

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('occurrences') as batch:
        batch.add_column(sa.Column('cuda_visible_devices', sa.String(length=200), nullable=True))
        batch.add_column(sa.Column('torch_version', sa.String(length=60), nullable=True))
        batch.add_column(sa.Column('failure', sa.String(length=20), nullable=True))
        batch.add_column(sa.Column('idempotency_key', sa.String(length=200), nullable=True))
        batch.create_unique_constraint('uq_occurrences_idempotency_key', ['idempotency_key'])
    with op.batch_alter_table('fixes') as batch:
        batch.add_column(sa.Column('edited_at', TS, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('fixes') as batch:
        batch.drop_column('edited_at')
    with op.batch_alter_table('occurrences') as batch:
        batch.drop_constraint('uq_occurrences_idempotency_key', type_='unique')
        batch.drop_column('idempotency_key')
        batch.drop_column('failure')
        batch.drop_column('torch_version')
        batch.drop_column('cuda_visible_devices')
