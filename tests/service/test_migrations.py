"""The Alembic migrations upgrade an empty database to head and downgrade it back to
empty, on SQLite and Postgres, and head matches the models exactly."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from kb.db import migrate
from kb.db.models import TABLES, Base
from kb.db.session import Database


def _tables(db: Database) -> set[str]:
    return set(sa.inspect(db.engine).get_table_names())


def test_upgrade_from_empty_and_downgrade_back(empty_db_url):
    db = Database(empty_db_url, pool_size=1)
    try:
        assert _tables(db) == set()
        migrate.upgrade(db.engine)
        assert migrate.current_revision(db.engine) == migrate.head_revision()
        assert _tables(db) >= set(TABLES)
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}),
                                    Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
        migrate.upgrade(db.engine)  # a second upgrade is a no-op
        migrate.downgrade(db.engine, "base")
        assert migrate.current_revision(db.engine) is None
        assert _tables(db) - {"alembic_version"} == set()
        migrate.upgrade(db.engine)  # and back up again
        assert _tables(db) >= set(TABLES)
        migrate.downgrade(db.engine, "base")
    finally:
        db.dispose()
