"""The bundled seed knowledge base, without a server: `kb analyze` and `kb run` (when the
service cannot be reached) advise from it with the very matching and advice the service
uses (kb.services.ingest.answer), so the offline answer is the one a freshly seeded
service would give.

The seeded database is a SQLite file in the cache directory, built once and reused
while nothing it depends on changes: its name carries a digest of the seed files and of
the analyzer's source (a rule change changes the seeds' fingerprints). A build goes to a
temporary file renamed into place, so concurrent runs never see half a database."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kb.core.records import Analysis
from kb.services.views import UploadResult

if TYPE_CHECKING:
    from kb.db.session import Database

SOURCES = Path(__file__).resolve().parents[1]  # the kb package: what decides the answer


def _digest(seeds_dir: Path) -> str:
    digest = hashlib.sha256()
    for root in (SOURCES, seeds_dir):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def local_kb_path(seeds_dir: Path, cache_dir: Path) -> Path:
    """The seeded database for these seeds and this analyzer, built when missing."""
    path = cache_dir / f"seed-kb-{_digest(seeds_dir)}.sqlite3"
    if path.exists():
        return path
    from kb.db import migrate
    from kb.db.session import Database
    from kb.services.seeding import seed_database

    cache_dir.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".seed-kb-", suffix=".sqlite3", dir=cache_dir)
    os.close(handle)
    try:
        db = Database(f"sqlite:///{temporary}", pool_size=1)
        try:
            migrate.upgrade(db.engine)
            seed_database(db, seeds_dir)
        finally:
            db.dispose()
        for stale in cache_dir.glob("seed-kb-*.sqlite3"):  # older seeds or analyzer
            stale.unlink(missing_ok=True)
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return path


def local_database(seeds_dir: Path, cache_dir: Path) -> Database:
    """The bundled seeds' database (built when missing); the caller disposes of it."""
    from kb.db.session import Database

    return Database(f"sqlite:///{local_kb_path(seeds_dir, cache_dir)}", pool_size=1)


def local_answer(analysis: Analysis, seeds_dir: Path, cache_dir: Path) -> UploadResult:
    """The service's answer for this analysis from the bundled seeds, storing nothing.
    It carries no URLs (only the web layer makes them), and its incident ids are the
    local database's, which mean nothing elsewhere (the report drops them)."""
    from kb.services.ingest import Overrides, answer, with_overrides

    db = local_database(seeds_dir, cache_dir)
    try:
        analysis, features = with_overrides(analysis, Overrides())
        return answer(db, analysis, features)
    finally:
        db.dispose()
