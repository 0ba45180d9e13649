"""`kb export` and `kb import`: share what a team curated with another team's knowledge
base as seed files (kb.services.packs)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from sqlalchemy.exc import SQLAlchemyError

from kb.db.commands import database_option, fail, settings_for


def _ids(value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        return [int(v.strip().lstrip("#")) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter("give incident numbers separated by commas, e.g. 12,15") from None


@click.command("export")
@click.argument("out_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--incidents", "incident_ids", default=None, metavar="ID,...",
              help="Only these incidents (default: every live incident).")
@database_option
def export(out_dir: Path, incident_ids: str | None, database_url: str | None) -> None:
    """Write the knowledge base's incidents, fixes, outcomes and chains to OUT_DIR as seed
    files (one YAML per incident), loadable by `kb import` or `kb seed --path`."""
    from kb.db import migrate
    from kb.db.session import Database
    from kb.services.errors import ServiceError
    from kb.services.packs import export_pack, write_pack

    settings = settings_for(database_url)
    database = Database(settings.database_url, pool_size=2)
    try:
        migrate.upgrade(database.engine)
        files = export_pack(database, _ids(incident_ids), settings.seeds_dir)
    except ServiceError as exc:
        raise click.UsageError(exc.detail) from None
    except SQLAlchemyError as exc:
        fail("export from", settings.database_url, exc)
        return
    finally:
        database.dispose()
    write_pack(files, out_dir)
    click.echo(f"{out_dir}: {len(files)} incident file(s) written")


@click.command("import")
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("--overwrite", is_flag=True,
              help="Take the pack's value where a person edited the incident or fix here.")
@database_option
def import_(path: Path, overwrite: bool, database_url: str | None) -> None:
    """Merge a pack (a folder of seed files, or a .tar.gz / .zip of them) into the
    knowledge base: adds what is new, updates what changed, keeps local edits (reported)
    unless --overwrite. Nothing is written when a file is invalid."""
    from kb.db import migrate
    from kb.db.session import Database
    from kb.services.errors import ServiceError
    from kb.services.packs import import_pack, read_folder

    settings = settings_for(database_url)
    database = Database(settings.database_url, pool_size=2)
    try:
        files = read_folder(path)
        migrate.upgrade(database.engine)
        report = import_pack(database, files, overwrite=overwrite)
    except ServiceError as exc:
        click.echo(f"kb import: {exc.detail}", err=True)
        sys.exit(2)
    except SQLAlchemyError as exc:
        fail("import into", settings.database_url, exc)
        return
    finally:
        database.dispose()
    for line in report.lines():
        click.echo(line)
    click.echo(f"{path}: {report.summary()}")
