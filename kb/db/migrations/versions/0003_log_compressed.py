"""occurrences.log_gz becomes log_compressed: new logs are stored zstd-compressed

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Rows stored before stay gzip (kb.db.logcodec reads both by their first bytes), so the
upgrade only renames the column. The downgrade turns zstd rows back into gzip before
renaming it back, so the older code can read every row.
"""

from __future__ import annotations

import gzip

import sqlalchemy as sa
import zstandard
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def upgrade() -> None:
    # Both Postgres and SQLite (3.25+) rename a column in place.
    op.execute("ALTER TABLE occurrences RENAME COLUMN log_gz TO log_compressed")


def downgrade() -> None:
    connection = op.get_bind()
    decompressor = zstandard.ZstdDecompressor()
    last_id = 0
    while True:  # in batches: the table can hold gigabytes of logs
        rows = connection.execute(sa.text(
            "SELECT id, log_compressed FROM occurrences WHERE id > :last ORDER BY id LIMIT 200"),
            {"last": last_id}).all()
        if not rows:
            break
        for row_id, blob in rows:
            blob = bytes(blob)
            if blob.startswith(ZSTD_MAGIC):
                connection.execute(sa.text(
                    "UPDATE occurrences SET log_compressed = :blob WHERE id = :id"),
                    {"id": row_id, "blob": gzip.compress(decompressor.decompressobj().decompress(blob),
                                                         compresslevel=6, mtime=0)})
        last_id = rows[-1][0]
    op.execute("ALTER TABLE occurrences RENAME COLUMN log_compressed TO log_gz")
