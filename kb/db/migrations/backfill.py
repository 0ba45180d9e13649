"""What data migrations share: walking a table in batches by id, and recomputing stored
recall keys (a migration for each change of kb.core.recall.message_key: keys stored under
an old rule would not be found by the new one)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa

from kb.core.recall import message_key


def keyset_batches(connection: sa.Connection, select: str, size: int) -> Iterator[Sequence[sa.Row[Any]]]:
    """The rows of `select` a batch of `size` at a time, by id (keyset pagination, so a
    batch's updates never shift the next one). `select` takes `:last` and `:n`, selects
    the id first and orders by it: "... WHERE id > :last ORDER BY id LIMIT :n"."""
    last_id = 0
    while True:
        rows = connection.execute(sa.text(select), {"last": last_id, "n": size}).all()
        if not rows:
            return
        yield rows
        last_id = rows[-1][0]


def recompute_message_keys(connection: sa.Connection) -> None:
    """Every stored fingerprint's message key under today's rule."""
    for rows in keyset_batches(connection, "SELECT id, message_template, message_key FROM incident_fingerprints "
                                           "WHERE id > :last ORDER BY id LIMIT :n", 1000):
        changed = [{"id": row_id, "key": key} for row_id, template, old in rows
                   if (key := message_key(template or "")) != old]
        if changed:
            connection.execute(sa.text("UPDATE incident_fingerprints SET message_key = :key WHERE id = :id"),
                               changed)
