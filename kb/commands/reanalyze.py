"""`kb reanalyze [--dry-run]`: regroup a stored KB by the installed analyzer's rules
(kb.services.reanalysis), or only say what would change."""

from __future__ import annotations

import sys

import click

from kb.db.commands import database_option, fail, settings_for


@click.command()
@database_option
@click.option("--dry-run", is_flag=True, help="Report what would move, split or join; change nothing.")
@click.option("--shown", type=click.IntRange(min=0), default=10, show_default=True, help="Examples per kind.")
def reanalyze(database_url: str | None, dry_run: bool, shown: int) -> None:
    """Analyze every stored log again with the installed rules and regroup the incidents
    the way an upload would group those logs today: occurrences move to the incident
    their identity routes to (or to a new one), one transaction per incident; what a
    person merged stays merged. With --dry-run, only report what would change. Exit 1
    when an incident could not be re-analyzed (it is left untouched)."""
    from sqlalchemy.exc import SQLAlchemyError

    from kb.db.session import Database
    from kb.services.reanalysis import apply, plan

    settings = settings_for(database_url)
    db = Database(settings.database_url, pool_size=1)
    try:
        report = (plan if dry_run else apply)(db, settings.match_candidates)
    except SQLAlchemyError as exc:
        fail("re-analyze", settings.database_url, exc)
        return
    finally:
        db.dispose()
    for line in report.lines(shown):
        click.echo(line)
    if report.failures:
        sys.exit(1)
