"""`kb reanalyze --dry-run`: what the installed analyzer would regroup in a stored KB."""

from __future__ import annotations

import click


@click.command()
@click.option("--database-url", default=None, help="SQLAlchemy URL (KB_DATABASE_URL; default: the embedded SQLite).")
@click.option("--dry-run", is_flag=True, help="Report what would move, split or join; change nothing.")
@click.option("--shown", type=click.IntRange(min=0), default=10, show_default=True, help="Examples per kind.")
def reanalyze(database_url: str | None, dry_run: bool, shown: int) -> None:
    """Analyze every stored log again with the installed rules and report how the
    incidents would regroup: occurrences whose fingerprint changes or that would move,
    incidents that would split or join."""
    from sqlalchemy.exc import SQLAlchemyError

    from kb.config import Settings
    from kb.db.session import Database
    from kb.services.reanalysis import plan

    if not dry_run:
        raise click.UsageError("only --dry-run exists yet: applying a regrouping is curated by hand "
                               "(merge, unmerge) from its report")
    try:
        settings = Settings.from_env(database_url=database_url)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    db = Database(settings.database_url, pool_size=1)
    try:
        report = plan(db)
    except SQLAlchemyError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise click.ClickException(f"cannot read {db!r}: {first}") from None
    finally:
        db.dispose()
    for line in report.lines(shown):
        click.echo(line)
