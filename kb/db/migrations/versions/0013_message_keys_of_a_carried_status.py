"""incident_fingerprints.message_key: recomputed so a wrapper that carries an absl / gRPC
status ("Bad StatusOr access: RESOURCE_EXHAUSTED: <text>") is keyed by that status's text

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07

Recall looks a crash's candidates up by message key (kb.core.recall.message_key): the key
of a wrapper's message now skips to the status it carries, as matching compares it.
The downgrade leaves the new keys (nothing is lost: the exception lookup still finds them).
"""

from __future__ import annotations

from alembic import op

from kb.db.migrations.backfill import recompute_message_keys

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    recompute_message_keys(op.get_bind())


def downgrade() -> None:
    pass  # the old rule's keys are what the old code looks up less often; see the docstring
