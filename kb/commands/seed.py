"""`kb seed`: load the seed knowledge base through kb.services.seeding. It lives with the
commands that call services; kb.db (and its `kb db` commands) never imports a service."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kb.db.commands import database_option, fail, settings_for


@click.command()
@click.option("--path", "seeds_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Seeds folder (default: KB_SEEDS_DIR, else the repo's seeds/).")
@database_option
@click.option("--no-migrate", is_flag=True, help="Do not upgrade the schema first.")
def seed(seeds_dir: Path | None, database_url: str | None, no_migrate: bool) -> None:
    """Load the seed knowledge base (idempotent: upsert by slug)."""
    from sqlalchemy.exc import SQLAlchemyError

    from kb.db import migrate
    from kb.db.session import Database
    from kb.services.seeding import seed_database

    settings = settings_for(database_url)
    root = seeds_dir or settings.seeds_dir
    database = Database(settings.database_url, pool_size=2)
    try:
        if not no_migrate:
            migrate.upgrade(database.engine)
        report = seed_database(database, root)
    except SQLAlchemyError as exc:
        fail("seed", settings.database_url, exc)
        return
    finally:
        database.dispose()
    for line in report.warnings:
        click.echo(f"warning: {line}", err=True)
    for line in report.errors:
        click.echo(f"error: {line}", err=True)
    click.echo(f"{root}: {report.summary()}")
    if report.errors:
        sys.exit(1)
