"""Engines and transactions. Services get a `Database` and open one short transaction
per operation: `read()` for queries, `write()` for changes (commit or roll back whole,
so nothing is ever half-written).

SQLite is the embedded single-writer store: WAL journal, a busy timeout, and write
transactions begin IMMEDIATE so two writers queue instead of failing on lock upgrade.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

SQLITE_BUSY_TIMEOUT_MS = 30_000


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str, *, pool_size: int = 10, connect_timeout: int = 5) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            # One in-memory database for the whole process (evaluations, throwaway runs):
            # every checkout must be the same connection, or each would see an empty one.
            engine = create_engine(parsed, connect_args={"check_same_thread": False},
                                   poolclass=StaticPool)
            _configure_sqlite(engine)
            return engine
        if parsed.database:
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_size=pool_size,
            max_overflow=pool_size,
        )
        _configure_sqlite(engine)
        return engine
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = connect_timeout
    return create_engine(
        parsed,
        connect_args=connect_args,
        pool_size=pool_size,
        max_overflow=pool_size,
        # No pre-ping round trip per request: when the database restarts, the first request
        # on a dead connection fails (503, Retry-After) and SQLAlchemy then invalidates
        # every pooled connection of that age, so the pool recovers at once.
        pool_pre_ping=False,
        pool_recycle=1800,
        pool_timeout=10,
    )


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see below)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get("kb_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class Database:
    """One engine per process plus the two kinds of transaction the services use."""

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self.engine = make_engine(url, pool_size=pool_size)
        self.dialect = self.engine.dialect.name
        # For statements that are a transaction on their own (kb.db.known_upload).
        self.autocommit_engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write = sessionmaker(self.engine.execution_options(kb_write=True),
                                   expire_on_commit=False)

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._read() as session:
            try:
                yield session
            finally:
                session.rollback()

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self._write() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()

    def copy_to(self, other: Database) -> None:
        """Replace `other`'s SQLite database with a copy of this one (SQLite's online
        backup): snapshots for throwaway runs such as the grouping evaluation."""
        source, target = self.engine.raw_connection(), other.engine.raw_connection()
        try:
            source.driver_connection.backup(target.driver_connection)  # type: ignore[union-attr]
        finally:
            target.close()
            source.close()

    def __repr__(self) -> str:
        return f"Database({make_url(self.url).render_as_string(hide_password=True)!r})"
