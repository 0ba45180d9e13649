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

import sqlalchemy as sa
from alembic import op

from kb.core.recall import message_key

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    connection = op.get_bind()
    last_id = 0
    while True:
        rows = connection.execute(sa.text(
            "SELECT id, message_template, message_key FROM incident_fingerprints WHERE id > :last "
            "ORDER BY id LIMIT :batch"), {"last": last_id, "batch": _BATCH}).all()
        if not rows:
            break
        changed = [{"id": row_id, "key": key} for row_id, template, old in rows
                   if (key := message_key(template or "")) != old]
        if changed:
            connection.execute(sa.text("UPDATE incident_fingerprints SET message_key = :key WHERE id = :id"),
                               changed)
        last_id = rows[-1][0]


def downgrade() -> None:
    pass  # the old rule's keys are a subset of what recall needs; see the docstring
