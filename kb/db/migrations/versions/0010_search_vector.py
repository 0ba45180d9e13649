"""occurrences.search_vector: Postgres indexes each excerpt's words, made in
Python, instead of an expression that rewrote the whole excerpt in SQL on every insert

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

On Postgres the upgrade fills the column from search_text in batches (as 0007 did),
swaps 0007's expression index for a GIN index on the column, and the downgrade swaps
them back. SQLite gets the column, always NULL: its FTS5 table reads search_text.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from kb.db import logsearch
from kb.db.migrations.backfill import keyset_batches

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

BATCH = 500
PG_INDEX = "ix_occurrences_search_vector"
PG_INDEX_0007 = "ix_occurrences_search_text_fts"
PG_DOCUMENT_0007 = ("to_tsvector('simple'::regconfig, regexp_replace(regexp_replace(search_text, "
                    "'[^[:alnum:]]+', ' ', 'g'), '([[:alpha:]](?=[[:digit:]])|[[:digit:]](?=[[:alpha:]]))', "
                    "'\\1 ', 'g'))")


def _backfill(connection: sa.Connection) -> None:
    for rows in keyset_batches(connection, "SELECT id, search_text FROM occurrences "
                                           "WHERE id > :last AND search_text IS NOT NULL ORDER BY id LIMIT :n", BATCH):
        connection.execute(sa.text("UPDATE occurrences SET search_vector = CAST(:words AS tsvector) WHERE id = :id"),
                           [{"id": row_id, "words": logsearch.search_words(text)} for row_id, text in rows])


def upgrade() -> None:
    vector = sa.Text().with_variant(postgresql.TSVECTOR(), "postgresql")
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("search_vector", vector, nullable=True))
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        _backfill(connection)
        connection.execute(sa.text(f"DROP INDEX IF EXISTS {PG_INDEX_0007}"))
        connection.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON occurrences USING gin (search_vector)"))


def downgrade() -> None:
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text(f"DROP INDEX IF EXISTS {PG_INDEX}"))
        connection.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {PG_INDEX_0007} ON occurrences "
                                   f"USING gin ({PG_DOCUMENT_0007})"))
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("search_vector")
