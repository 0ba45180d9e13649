"""occurrences.search_text and its full-text index: search over the stored log text

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

The column holds what kb.db.logsearch indexes of each redacted log (all of a small one,
a bounded excerpt of a large one); SQLite indexes it with an FTS5 trigram table kept in
step by triggers, Postgres with a GIN index on its 'simple' tsvector. The upgrade fills
the column for the occurrences already stored, in batches (the table can hold gigabytes
of logs); the downgrade drops the index and the column.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from kb.db import logsearch
from kb.db.logcodec import decompress_log

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

BATCH = 200


def _backfill(connection: sa.Connection) -> None:
    last_id = 0
    while True:
        rows = connection.execute(sa.text(
            "SELECT id, log_compressed, analysis FROM occurrences WHERE id > :last "
            "ORDER BY id LIMIT :n"), {"last": last_id, "n": BATCH}).all()
        if not rows:
            break
        for row_id, blob, analysis in rows:
            if isinstance(analysis, str):  # SQLite hands JSON back as text
                analysis = json.loads(analysis)
            try:
                log = decompress_log(blob)
            except ValueError:
                continue  # unreadable rows stay unindexed
            connection.execute(sa.text("UPDATE occurrences SET search_text = :text WHERE id = :id"),
                               {"id": row_id, "text": logsearch.search_text(log, analysis or {})})
        last_id = rows[-1][0]


def upgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("search_text", sa.Text(), nullable=True))
    connection = op.get_bind()
    logsearch.create_index(connection)
    _backfill(connection)


def downgrade() -> None:
    logsearch.drop_index(op.get_bind())
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("search_text")
