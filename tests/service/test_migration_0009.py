"""0008 -> 0009 -> 0008 with an incident in place, on SQLite and Postgres: the incident
keeps everything, starts `open` and never resolved; the downgrade drops only what 0009
added."""

from __future__ import annotations

import sqlalchemy as sa

from kb.db import migrate
from kb.db.session import Database
from tests.service.test_migrations import _add_incident

NEW_TABLES = {"incident_resolutions", "notification_outbox", "notification_deliveries"}


def test_0009_starts_existing_incidents_open_and_downgrades_cleanly(empty_db_url):
    db = Database(empty_db_url, pool_size=1)
    try:
        migrate.upgrade(db.engine, "0008")
        with db.engine.begin() as conn:
            _add_incident(conn)
        migrate.upgrade(db.engine, "0009")
        assert NEW_TABLES <= set(sa.inspect(db.engine).get_table_names())
        with db.engine.begin() as conn:
            row = conn.execute(sa.text("SELECT title, status, resolved_in, resolved_at, "
                                       "regressed_at, spike_notified_at FROM incidents")).one()
            assert tuple(row) == ("kept", "open", None, None, None, None)
        migrate.downgrade(db.engine, "0008")
        assert not NEW_TABLES & set(sa.inspect(db.engine).get_table_names())
        columns = {c["name"] for c in sa.inspect(db.engine).get_columns("incidents")}
        assert "status" not in columns and "resolved_in" not in columns
        with db.engine.begin() as conn:
            assert conn.execute(sa.text("SELECT title FROM incidents")).scalar() == "kept"
        migrate.downgrade(db.engine, "base")
    finally:
        db.dispose()
