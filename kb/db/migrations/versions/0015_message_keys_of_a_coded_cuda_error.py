"""incident_fingerprints.message_key: recomputed for the identifying part of 2026-12-07
(later): ggml's coded CUDA error ("CUDA error 222 at <file>:<line>: <text>") is the CUDA
error it states ("CUDA error: <text>"); torch's OOM text ends where its report of the
run's memory begins

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07

Recall looks a crash's candidates up by message key (kb.core.recall.message_key), which is
made of kb.core.comparable's view: keys stored under the old view would not be found.
The downgrade leaves the new keys (nothing is lost: the exception lookup still finds them).
"""

from __future__ import annotations

from alembic import op

from kb.db.migrations.backfill import recompute_message_keys

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    recompute_message_keys(op.get_bind())


def downgrade() -> None:
    pass  # the old rule's keys are what the old code looks up less often; see the docstring
