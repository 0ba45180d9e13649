"""Alembic environment: runs on the connection `kb.db.migrate` hands over, or on
KB_DATABASE_URL when called as plain `alembic` from the repository (alembic.ini)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from kb.db.logsearch import outside_models
from kb.db.models import Base

# Any fixed 64-bit number: serialises concurrent `kb db upgrade` runs on one Postgres.
_PG_MIGRATION_LOCK = 0x6B62_6D69_6772


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=outside_models,  # the full-text index is made by hand (kb.db.logsearch)
    )
    locked = connection.dialect.name == "postgresql"
    if locked:
        connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        connection.commit()
    try:
        with context.begin_transaction():
            context.run_migrations()
    finally:
        if locked:
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_MIGRATION_LOCK})
            connection.commit()


def main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from kb.config import Settings
    from kb.db.session import make_engine

    url = context.config.get_main_option("sqlalchemy.url") or Settings.from_env().database_url
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
main()
