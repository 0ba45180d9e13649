"""`kb db upgrade|downgrade|current` (kb.db.commands) and `kb seed` (kb.commands.seed) as
a user runs them, on SQLite and Postgres."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from kb.db import migrate
from kb.db.models import TABLES
from tests.service.helpers import SAMPLE_SEEDS

ROOT = Path(__file__).resolve().parents[2]


def kb(*args: str, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kb.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120,
                          env={**os.environ, "KB_DATABASE_URL": url, **env}, stdin=subprocess.DEVNULL)


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_db_upgrade_downgrade_and_seed(fresh_db_url, tmp_path):
    up = kb("db", "upgrade", url=fresh_db_url)
    assert up.returncode == 0, up.stderr
    head = migrate.head_revision()
    assert f"revision {head}" in up.stdout
    assert _tables(fresh_db_url) >= set(TABLES)
    assert f"current: {head}" in kb("db", "current", url=fresh_db_url).stdout

    seeded = kb("seed", "--path", str(SAMPLE_SEEDS), url=fresh_db_url)
    assert seeded.returncode == 0, seeded.stderr
    assert "3 added" in seeded.stdout
    again = kb("seed", url=fresh_db_url, KB_SEEDS_DIR=str(SAMPLE_SEEDS))
    assert again.returncode == 0 and "3 unchanged" in again.stdout

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.yaml").write_text("slug: Bad Slug\n")
    failed = kb("seed", "--path", str(bad), url=fresh_db_url)
    assert failed.returncode == 1 and "kebab-case" in failed.stderr

    down = kb("db", "downgrade", "--yes", url=fresh_db_url)
    assert down.returncode == 0, down.stderr
    assert _tables(fresh_db_url) - {"alembic_version"} == set()


def test_unreachable_database_is_a_message_not_a_traceback():
    url = "postgresql+psycopg://postgres@127.0.0.1:9/nothing?connect_timeout=1"
    for args in (("db", "upgrade"), ("seed",)):
        result = kb(*args, url=url)
        assert result.returncode == 1
        assert "cannot" in result.stderr and "Traceback" not in result.stderr
