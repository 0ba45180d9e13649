"""The Alembic migrations upgrade an empty database to head and downgrade it back to
empty, on SQLite and Postgres, and head matches the models exactly."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from kb.db import migrate
from kb.db.logsearch import outside_models
from kb.db.models import TABLES, Base
from kb.db.session import Database


def _tables(db: Database) -> set[str]:
    return set(sa.inspect(db.engine).get_table_names())


def test_upgrade_from_empty_and_downgrade_back(empty_db_url):
    db = Database(empty_db_url, pool_size=1)
    try:
        assert _tables(db) == set()
        migrate.upgrade(db.engine)
        assert migrate.current_revision(db.engine) == migrate.head_revision()
        assert _tables(db) >= set(TABLES)
        with db.engine.connect() as conn:
            # the full-text index is made by hand, outside the models (kb.db.logsearch)
            opts = {"compare_type": True, "include_name": outside_models}
            diff = compare_metadata(MigrationContext.configure(conn, opts=opts), Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
        migrate.upgrade(db.engine)  # a second upgrade is a no-op
        migrate.downgrade(db.engine, "base")
        assert migrate.current_revision(db.engine) is None
        assert _tables(db) - {"alembic_version"} == set()
        migrate.upgrade(db.engine)  # and back up again
        assert _tables(db) >= set(TABLES)
        migrate.downgrade(db.engine, "base")
    finally:
        db.dispose()


def _add_incident(conn: sa.Connection) -> None:
    """Incident 1, in the columns every revision has, for occurrences to point at."""
    conn.execute(sa.text(
        "INSERT INTO incidents (id, title, tags, links, model_archs, gpu_families, "
        "engine_limitation, recommended_path, seeded, occurrence_count, created_at, "
        "updated_at) VALUES (1, 'kept', '[]', '[]', '[]', '[]', false, 'investigate', "
        "false, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))


def _add_occurrence(conn: sa.Connection, log: bytes, *, column: str = "log_gz",
                    key: str | None = None) -> None:
    """An occurrence of incident 1, in the columns of the revision at hand."""
    extra, value = (", idempotency_key", ", :key") if key else ("", "")
    conn.execute(sa.text(
        f"INSERT INTO occurrences (incident_id, match_status, analysis, {column}, log_bytes, "
        f"log_lines, redactions, created_at{extra}) VALUES (1, 'new', '{{}}', :log, 3, 1, 0, "
        f"CURRENT_TIMESTAMP{value})"), {"log": log, "key": key})


def test_0002_keeps_stored_uploads_and_enforces_one_occurrence_per_key(empty_db_url):
    """0001 -> 0002 -> 0001 with rows in place: nothing stored is lost (SQLite rebuilds
    the table in batch mode), the new columns start empty and the key is unique."""
    db = Database(empty_db_url, pool_size=1)
    try:
        migrate.upgrade(db.engine, "0001")
        with db.engine.begin() as conn:
            _add_incident(conn)
            _add_occurrence(conn, b"old")
        migrate.upgrade(db.engine, "0002")
        assert migrate.current_revision(db.engine) == "0002"
        with db.engine.begin() as conn:
            row = conn.execute(sa.text("SELECT log_gz, idempotency_key, failure FROM occurrences")).one()
            assert (bytes(row[0]), row[1], row[2]) == (b"old", None, None)
            _add_occurrence(conn, b"new", key="k1")
            _add_occurrence(conn, b"no key")
        try:
            with db.engine.begin() as conn:
                _add_occurrence(conn, b"dup", key="k1")
            raise AssertionError("a second occurrence with one idempotency key was stored")
        except sa.exc.IntegrityError:
            pass
        migrate.downgrade(db.engine, "0001")
        with db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM occurrences")).scalar_one() == 3
        columns = {c["name"] for c in sa.inspect(db.engine).get_columns("occurrences")}
        assert "idempotency_key" not in columns and "log_gz" in columns
        assert "edited_at" not in {c["name"] for c in sa.inspect(db.engine).get_columns("fixes")}
    finally:
        migrate.downgrade(db.engine, "base")
        db.dispose()


def test_0003_reads_old_gzip_logs_and_downgrades_zstd_logs_to_gzip(empty_db_url):
    """Logs stored as gzip before 0003 still read back after it; the downgrade turns the
    zstd logs written since into gzip, so the older code reads every row."""
    import gzip

    from kb.db.logcodec import compress_log, decompress_log

    db = Database(empty_db_url, pool_size=1)
    try:
        migrate.upgrade(db.engine, "0002")
        with db.engine.begin() as conn:
            _add_incident(conn)
            _add_occurrence(conn, gzip.compress(b"old gzip log\n"))
        migrate.upgrade(db.engine, "0003")
        with db.engine.begin() as conn:
            _add_occurrence(conn, compress_log(b"new zstd log\n"), column="log_compressed")
            stored = [decompress_log(row[0]) for row in conn.execute(sa.text(
                "SELECT log_compressed FROM occurrences ORDER BY id"))]
        assert stored == [b"old gzip log\n", b"new zstd log\n"]
        migrate.downgrade(db.engine, "0002")
        with db.engine.connect() as conn:
            stored = [gzip.decompress(bytes(row[0])) for row in conn.execute(sa.text(
                "SELECT log_gz FROM occurrences ORDER BY id"))]
        assert stored == [b"old gzip log\n", b"new zstd log\n"]
    finally:
        migrate.downgrade(db.engine, "base")
        db.dispose()


def test_0004_counts_the_terms_of_stored_v3_fingerprints(empty_db_url):
    """A v3 database keeps its incidents and fingerprints; 0004 counts the terms of the
    stored templates (the IDF weights of matching) and the downgrade drops the counts."""
    db = Database(empty_db_url, pool_size=1)
    try:
        migrate.upgrade(db.engine, "0003")
        with db.engine.begin() as conn:
            _add_incident(conn)
            for n, template in enumerate(("CUDA out of memory. Tried to allocate <size>",
                                          "CUDA error: an illegal memory access was encountered")):
                conn.execute(sa.text(
                    "INSERT INTO incident_fingerprints (incident_id, version, hash, route_key, source, "
                    "exception, message_key, message_template, frames, created_at) VALUES "
                    "(1, '3.1', :hash, :route, 'upload', 'RuntimeError', 'cuda', :template, '[]', "
                    "CURRENT_TIMESTAMP)"), {"hash": f"h{n}", "route": f"r{n}", "template": template})
        migrate.upgrade(db.engine, "0004")
        with db.engine.connect() as conn:
            counts = dict(conn.execute(sa.text("SELECT term, templates FROM template_terms")).all())
            kept = conn.execute(sa.text("SELECT id, title FROM incidents")).all()
        assert counts[""] == 2 and counts["cuda"] == 2 and counts["memory"] == 2
        assert counts["illegal"] == 1 and counts["allocate"] == 1
        assert [tuple(row) for row in kept] == [(1, "kept")]
        migrate.downgrade(db.engine, "0003")
        assert "template_terms" not in _tables(db)
    finally:
        migrate.downgrade(db.engine, "base")
        db.dispose()


def _key_after(db_url: str, revision: str, exception: str, old_key: str, template: str) -> str:
    """The message key a fingerprint stored under `revision`'s predecessor with `old_key`
    has once `revision` ran (then downgraded to the start: a migration that may not lose it)."""
    before = f"{int(revision) - 1:04d}"
    db = Database(db_url, pool_size=1)
    try:
        migrate.upgrade(db.engine, before)
        with db.engine.begin() as conn:
            _add_incident(conn)
            conn.execute(sa.text(
                "INSERT INTO incident_fingerprints (incident_id, version, hash, route_key, source, "
                "exception, message_key, message_template, frames, created_at) VALUES "
                "(1, '4', 'h', 'r', 'upload', :exception, :key, :template, '[]', CURRENT_TIMESTAMP)"),
                {"exception": exception, "key": old_key, "template": template})
        migrate.upgrade(db.engine, revision)
        with db.engine.connect() as conn:
            key = conn.execute(sa.text("SELECT message_key FROM incident_fingerprints")).scalar()
        migrate.downgrade(db.engine, before)
        return key
    finally:
        migrate.downgrade(db.engine, "base")
        db.dispose()


def test_0011_recomputes_stored_message_keys_from_the_identifying_part(empty_db_url):
    """A fingerprint stored with the old key (the template's first three words, a rank's
    locator tag and a wrapper's clause included) gets the key recall now looks up."""
    from kb.core.recall import message_key

    wrapped = ("[PG <n> Rank <n>] Process group watchdog thread terminated with exception: [Rank <n>] "
               "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<n>) ran for <n> milliseconds")
    key = _key_after(empty_db_url, "0011", "DistBackendError", "pg rank process", wrapped)
    assert key == "watchdog caught collective"
    assert key == message_key("[Rank <n>] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<n>)")


def test_0012_keys_a_wrapper_that_carries_a_typed_error_by_that_error(empty_db_url):
    """A wrapper's fingerprint stored under 0011's key (its own words) gets the key of the
    error it carries, which an upload of that error alone looks up."""
    from kb.core.recall import message_key

    wrapped = "Capture cuda graph failed: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during capture."
    key = _key_after(empty_db_url, "0012", "Exception", "runtimeerror cannot call", wrapped)
    assert key == "cannot call cudageneratorimpl"
    assert key == message_key("Cannot call CUDAGeneratorImpl::current_seed during capture.")


def test_0013_keys_a_wrapper_that_carries_a_status_by_that_status(empty_db_url):
    """A wrapper's fingerprint stored under 0012's key (its own words) gets the key of the
    absl status it carries, which an upload of that status alone looks up."""
    from kb.core.recall import message_key

    wrapped = ("Bad StatusOr access: RESOURCE_EXHAUSTED: Error loading program: Attempting to reserve <size> "
               "at the bottom of memory.")
    key = _key_after(empty_db_url, "0013", "RuntimeError", "bad statusor access", wrapped)
    assert key == "attempting reserve size"
    assert key == message_key("Error loading program: Attempting to reserve <size> at the bottom of memory.")


def test_0014_keys_nccls_result_by_its_last_error(empty_db_url):
    """A fingerprint stored under 0013's key (NCCL's result sentence) gets the key of its
    last error, which a NCCL WARN line of the same failure looks up."""
    from kb.core.recall import message_key

    quoted = "Call to CUDA function failed. Last error: Cuda failure <n> 'invalid argument'"
    key = _key_after(empty_db_url, "0014", "ncclUnhandledCudaError", "call cuda function", quoted)
    assert key == "cuda failure invalid"
    assert key == message_key("Cuda failure <n> 'invalid argument'")


def test_0015_keys_a_coded_cuda_error_by_its_text(empty_db_url):
    """A fingerprint stored under 0014's key (ggml's "CUDA error <n> at <file>:<n>: ...")
    gets the key of the CUDA error's text, which the later format looks up."""
    from kb.core.recall import message_key

    coded = "CUDA error <n> at <path>/ggml-cuda.cu:<n>: the provided PTX was compiled with an unsupported toolchain."
    key = _key_after(empty_db_url, "0015", "CUDA error", "cuda error path", coded)
    assert key == "provided ptx was"
    assert key == message_key("CUDA error: the provided PTX was compiled with an unsupported toolchain.")
