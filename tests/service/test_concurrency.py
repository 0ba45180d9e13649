"""Concurrent uploads of one new crash create one incident (SQLite and Postgres), and an
unreachable database answers 503 with Retry-After, storing nothing."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from kb.db.models import Incident, IncidentFingerprint, Occurrence
from kb.services.ingest import Overrides, ingest_upload
from tests.conftest import free_port
from tests.service.helpers import api_client, upload
from tests.service.logs import NCCL, vllm_log


def _count(db, model) -> int:
    with db.read() as s:
        return s.execute(select(func.count()).select_from(model)).scalar_one()


@pytest.mark.parametrize("threads", [8])
def test_concurrent_uploads_of_one_crash_make_one_incident(db, threads):
    logs = [vllm_log(seed=n, **NCCL).encode() for n in range(threads * 2)]
    barrier = threading.Barrier(threads)
    results, errors = [], []

    def worker(chunk):
        try:
            barrier.wait(timeout=30)
            for data in chunk:
                results.append(ingest_upload(db, data, Overrides()))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(logs[n::threads],)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=120)
    assert errors == []
    assert len(results) == len(logs)
    assert len({r.incident.id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert _count(db, Incident) == 1
    assert _count(db, IncidentFingerprint) == 1
    assert _count(db, Occurrence) == len(logs)
    with db.read() as s:
        assert s.execute(select(Incident.occurrence_count)).scalar_one() == len(logs)


def test_unreachable_database_answers_503_with_retry_after(tmp_path):
    from kb.db.session import Database

    # Nothing listens on this port: every query fails to connect.
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing?connect_timeout=1"
    db = Database(url, pool_size=1)
    try:
        with api_client(db) as client:
            for response in (
                upload(client, vllm_log()),
                client.get("/incidents"),
                client.get("/incidents/1"),
                client.get("/healthz"),
                client.post("/analyze", content=vllm_log().encode(), headers={"Content-Type": "text/plain"}),
            ):
                assert response.status_code == 503, response.text
                assert response.headers["retry-after"].isdigit()
                assert "retry" in response.json()["detail"]
            # bad input is still judged before the database is needed
            assert client.post("/incidents", files={"log": ("x", b"")}).status_code == 400
    finally:
        db.dispose()


def test_database_failing_mid_upload_leaves_nothing_half_written(db):
    """Stop the database between the incident insert and the commit: nothing stays."""
    from sqlalchemy import event

    calls = {"n": 0}

    def explode(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("INSERT INTO OCCURRENCES"):
            calls["n"] += 1
            from sqlalchemy.exc import OperationalError

            raise OperationalError(statement, {}, Exception("server closed the connection"))

    event.listen(db.engine, "before_cursor_execute", explode)
    try:
        with api_client(db) as client:
            response = upload(client, vllm_log())
            assert response.status_code == 503
    finally:
        event.remove(db.engine, "before_cursor_execute", explode)
    assert calls["n"] == 1
    assert _count(db, Incident) == 0 and _count(db, IncidentFingerprint) == 0
