"""`kb serve`: migrate, load the seeds into an empty database, then serve the API."""

from __future__ import annotations

import logging
import os
import sys
from functools import partial

import click
from sqlalchemy.exc import SQLAlchemyError

from kb.config import Settings


@click.command()
@click.option("--host", default=None, help="Address to bind (KB_HOST, default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (KB_PORT, default 8000).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Service processes (KB_WORKERS, default 1); they share only the database.")
@click.option("--database-url", default=None, help="SQLAlchemy URL (KB_DATABASE_URL).")
@click.option("--no-migrate", is_flag=True, help="Do not upgrade the schema on start.")
def serve(host: str | None, port: int | None, workers: int | None, database_url: str | None,
          no_migrate: bool) -> None:
    """Serve the Crash KB API (`curl -F log=@vllm.log http://127.0.0.1:8000/incidents`)."""
    import uvicorn

    from kb.db import migrate
    from kb.db.session import Database
    from kb.services.seeding import seed_if_empty
    from kb.web.headerlimits import BoundedHttpToolsProtocol

    try:
        settings = Settings.from_env(host=host, port=port, workers=workers,
                                     database_url=database_url)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    database = Database(settings.database_url, pool_size=2)
    try:
        if not no_migrate:
            migrate.upgrade(database.engine)
        if settings.seed:
            report = seed_if_empty(database, settings.seeds_dir)
            if report is not None:
                click.echo(f"kb: loaded seeds from {settings.seeds_dir}: {report.summary()}", err=True)
                for line in report.errors:
                    click.echo(f"kb: seed error: {line}", err=True)
    except SQLAlchemyError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        click.echo(f"kb: database unavailable ({database!r}): {first}", err=True)
        sys.exit(1)
    finally:
        database.dispose()
    # Worker processes read the same settings from the environment.
    os.environ.update(settings.to_env())
    click.echo(f"kb: serving on http://{settings.host}:{settings.port} "
               f"({settings.workers} worker(s), {database!r})", err=True)
    # uvicorn's httptools protocol, with bounds on header size and header time
    http = partial(BoundedHttpToolsProtocol, max_header_bytes=settings.max_header_kb * 1024,
                   header_timeout=settings.header_timeout)
    uvicorn.run("kb.web.app:create_app", factory=True, host=settings.host, port=settings.port,
                workers=settings.workers, http=http,  # type: ignore[arg-type]
                log_level=settings.log_level.lower(),
                access_log=settings.log_level.lower() == "debug", server_header=False)
