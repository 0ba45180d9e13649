"""incident_fingerprints.message_key: recomputed from the template's identifying part
(kb.core.comparable), without a rank's locator tag, a wrapper's "terminated with
exception:" clause or a short leading label

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05

Recall looks a crash's candidates up by message key: keys stored under the old rule would
not be found by the new one. The upgrade recomputes every stored key in batches; the
downgrade leaves the new keys, which the old code only recalls less often (nothing is
lost: the exception lookup still finds them).
"""

from __future__ import annotations

from alembic import op

from kb.db.migrations.backfill import recompute_message_keys

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    recompute_message_keys(op.get_bind())


def downgrade() -> None:
    pass  # the old rule's keys are a subset of what recall needs; see the docstring
