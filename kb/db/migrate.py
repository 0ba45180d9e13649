"""Run the packaged Alembic migrations programmatically (no alembic.ini needed), so
`kb db upgrade` and `kb serve` work from an editable install, a wheel or a Docker image."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(engine: Engine | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if engine is not None:
        config.set_main_option("sqlalchemy.url",
                               engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    with engine.connect() as connection:
        config = alembic_config(engine)
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    with engine.connect() as connection:
        config = alembic_config(engine)
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()
