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
from kb.db.migrations.backfill import keyset_batches

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

BATCH = 200

# The index as this revision made it (kb.db.logsearch indexes another way since 0010).
PG_INDEX_0007 = "ix_occurrences_search_text_fts"
PG_DOCUMENT_0007 = ("to_tsvector('simple'::regconfig, regexp_replace(regexp_replace(search_text, "
                    "'[^[:alnum:]]+', ' ', 'g'), '([[:alpha:]](?=[[:digit:]])|[[:digit:]](?=[[:alpha:]]))', "
                    "'\\1 ', 'g'))")


def _create_index(connection: sa.Connection) -> None:
    if connection.dialect.name == "sqlite":
        logsearch.create_index(connection)  # the FTS5 table: unchanged since
    else:
        connection.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {PG_INDEX_0007} ON occurrences "
                                   f"USING gin ({PG_DOCUMENT_0007})"))


def _drop_index(connection: sa.Connection) -> None:
    if connection.dialect.name == "sqlite":
        logsearch.drop_index(connection)
    else:
        connection.execute(sa.text(f"DROP INDEX IF EXISTS {PG_INDEX_0007}"))


def _backfill(connection: sa.Connection) -> None:
    for rows in keyset_batches(connection, "SELECT id, log_compressed, analysis FROM occurrences "
                                           "WHERE id > :last ORDER BY id LIMIT :n", BATCH):
        for row_id, blob, analysis in rows:
            if isinstance(analysis, str):  # SQLite hands JSON back as text
                analysis = json.loads(analysis)
            try:
                log = decompress_log(blob)
            except ValueError:
                continue  # unreadable rows stay unindexed
            connection.execute(sa.text("UPDATE occurrences SET search_text = :text WHERE id = :id"),
                               {"id": row_id, "text": logsearch.search_text(log, analysis or {})})


def upgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("search_text", sa.Text(), nullable=True))
    connection = op.get_bind()
    _create_index(connection)
    _backfill(connection)


def downgrade() -> None:
    _drop_index(op.get_bind())
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("search_text")
