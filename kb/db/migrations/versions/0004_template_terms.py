"""template_terms: document frequencies of the terms of stored message templates, and
an index to recall fingerprints by message key under any exception type

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Fingerprint v4 weighs message terms by their rarity in the knowledge base. The upgrade
counts the terms of every stored fingerprint (in batches); the downgrade drops the table.
Incidents and occurrences are untouched: v3 fingerprints keep routing their incidents,
and new uploads reach them through fuzzy matching (`kb reanalyze` moves them to v4).
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from alembic import op

from kb.core.recall import terms

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "template_terms",
        sa.Column("term", sa.String(length=120), nullable=False),
        sa.Column("templates", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("term", name=op.f("pk_template_terms")),
    )
    op.create_index("ix_incident_fingerprints_message_key_id", "incident_fingerprints",
                    ["message_key", "id"])
    connection = op.get_bind()
    counts: Counter[str] = Counter()
    last_id = 0
    while True:
        rows = connection.execute(sa.text(
            "SELECT id, message_template FROM incident_fingerprints WHERE id > :last "
            "ORDER BY id LIMIT 1000"), {"last": last_id}).all()
        if not rows:
            break
        for _, template in rows:
            counts[""] += 1
            counts.update(term[:120] for term in terms(template or ""))
        last_id = rows[-1][0]
    if counts:
        op.bulk_insert(table, [{"term": t, "templates": n} for t, n in sorted(counts.items())])


def downgrade() -> None:
    op.drop_index("ix_incident_fingerprints_message_key_id", table_name="incident_fingerprints")
    op.drop_table("template_terms")
