"""`kb db upgrade|downgrade|current`, and the option and error handling every command
that opens the database shares (`kb seed`, `kb reanalyze` in kb.commands)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from kb.config import Settings

database_option = click.option(
    "--database-url", envvar="KB_DATABASE_URL", default=None,
    help="SQLAlchemy URL (default: KB_DATABASE_URL, else the embedded SQLite file).")


def settings_for(database_url: str | None) -> Settings:
    try:
        return Settings.from_env(database_url=database_url)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def fail(action: str, url: str, exc: Exception) -> None:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    click.echo(f"kb: cannot {action} {safe_url(url)}: {first}", err=True)
    sys.exit(1)


@contextmanager
def _engine(database_url: str | None, action: str) -> Iterator[Engine]:
    """An engine on the chosen database for one command; a database error becomes a
    one-line message and exit 1, and the engine is always disposed."""
    from kb.db.session import make_engine

    settings = settings_for(database_url)
    engine = make_engine(settings.database_url, pool_size=1)
    try:
        yield engine
    except SQLAlchemyError as exc:
        fail(action, settings.database_url, exc)
    finally:
        engine.dispose()


@click.group()
def db() -> None:
    """Create or migrate the database schema (Alembic migrations shipped in the package)."""


@db.command()
@click.argument("revision", default="head")
@database_option
def upgrade(revision: str, database_url: str | None) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from kb.db import migrate

    with _engine(database_url, "migrate") as engine:
        migrate.upgrade(engine, revision)
        click.echo(f"database at revision {migrate.current_revision(engine)}")


@db.command()
@click.argument("revision", default="base")
@database_option
@click.option("--yes", is_flag=True, help="Do not ask before dropping tables.")
def downgrade(revision: str, database_url: str | None, yes: bool) -> None:
    """Migrate the database down to REVISION (default: base, which drops every table)."""
    from kb.db import migrate

    if revision == "base" and not yes and sys.stdin.isatty():
        click.confirm(f"drop every table of {safe_url(settings_for(database_url).database_url)}?", abort=True)
    with _engine(database_url, "migrate") as engine:
        migrate.downgrade(engine, revision)
        click.echo(f"database at revision {migrate.current_revision(engine) or 'base'}")


@db.command()
@database_option
def current(database_url: str | None) -> None:
    """Print the database's schema revision and the newest one this version ships."""
    from kb.db import migrate

    with _engine(database_url, "read") as engine:
        click.echo(f"current: {migrate.current_revision(engine) or 'base'}")
        click.echo(f"head:    {migrate.head_revision()}")
