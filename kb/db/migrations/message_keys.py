"""Recomputing stored recall keys: a migration for each change of kb.core.recall.message_key
(stored keys under an old rule would not be found by the new one)."""

from __future__ import annotations

import sqlalchemy as sa

from kb.core.recall import message_key

_BATCH = 1000


def recompute_message_keys(connection: sa.Connection) -> None:
    """Every stored fingerprint's message key under today's rule, in batches."""
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
