"""A repeat of a known crash on Postgres is stored by one statement (kb.db.known_upload):
it must write what the general path writes, count and add facets like it, and leave
everything it does not cover (no route, an incident merged away) to the general path."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import event, select

from kb.db.known_upload import OCCURRENCE_COLUMNS, store_known_occurrence
from kb.db.models import Incident, IncidentFacet, Occurrence
from kb.db.repositories import Repository
from tests.service.helpers import api_client, upload
from tests.service.logs import NCCL, vllm_log


@pytest.fixture(scope="module")
def backend() -> str:
    """Postgres only: data-modifying CTEs are Postgres'; on SQLite every upload takes the
    general path, which the other service tests cover on both databases."""
    return "postgres"


@pytest.fixture
def postgres_db(db):
    assert db.dialect == "postgresql"
    return db


def _occurrence(**changes):
    values = dict(
        fingerprint_hash="f" * 64, match_status="known", match_score=100.0,
        analysis={"root_cause": {"exception": "ValueError", "message": "no cache blocks"},
                  "lines": [1, 2], "notes": []},
        log_compressed=bytes(range(256)) * 300, log_bytes=1_000_000, log_lines=6400,
        redactions=2, engine="vllm", engine_version="0.11.0", model="moonshotai/Kimi-K2",
        model_arch="kimi_k2", gpu_name="NVIDIA H100 80GB HBM3", gpu_count=8, tp=8, dp=None,
        pp=1, ep=None, phase="kv_cache_profiling", reporter="ana", host=None,
        command="vllm serve moonshotai/Kimi-K2 --tp 8", exit_code=1,
        cuda_visible_devices="0,1,2,3,4,5,6,7", torch_version="2.8.0", failure="exit", ruleset="v4-0123456789ab",
        idempotency_key=None, search_text="ValueError: no cache blocks\nlibcuda.so.1",
        created_at=datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    values.update(changes)
    # search_vector: made of search_text where the row is written (kb.db.logsearch)
    assert set(values) == set(OCCURRENCE_COLUMNS) - {"incident_id", "search_vector"}
    return values


def _row(db, occurrence_id: int) -> dict:
    with db.read() as s:
        row = s.execute(select(Occurrence.__table__).where(Occurrence.id == occurrence_id)).mappings().one()
    return {k: v for k, v in row.items() if k != "id"}


def _stored_incident(client) -> tuple[int, str]:
    """An incident stored by an upload, and the route its fingerprint has."""
    answer = upload(client, vllm_log()).json()
    with client.app.state.db.read() as s:
        from kb.db.models import IncidentFingerprint

        route = s.execute(select(IncidentFingerprint.route_key).where(
            IncidentFingerprint.incident_id == answer["incident"]["id"])).scalar_one()
    return answer["incident"]["id"], route


def test_the_statement_writes_the_row_the_general_path_writes(postgres_db):
    with api_client(postgres_db) as client:
        incident_id, route = _stored_incident(client)
    values = _occurrence()
    seen = datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC)
    stored = store_known_occurrence(postgres_db.autocommit_engine, route, values,
                                    {("gpu", "nvidia h100 80gb hbm3"), ("model_arch", "kimi_k2")}, seen)
    assert stored is not None
    head, fast_id = stored
    with postgres_db.write() as s:
        general_id = Repository(s).add_occurrence({**values, "incident_id": incident_id})
    assert _row(postgres_db, fast_id) == _row(postgres_db, general_id)
    assert head.id == incident_id and head.occurrence_count == 2 and head.last_seen == seen
    with postgres_db.read() as s:
        facets = set(s.execute(select(IncidentFacet.kind, IncidentFacet.value).where(
            IncidentFacet.incident_id == incident_id)).all())
    assert {("gpu", "nvidia h100 80gb hbm3"), ("model_arch", "kimi_k2")} <= facets


def test_no_route_or_a_merged_incident_writes_nothing(postgres_db):
    with api_client(postgres_db) as client:
        incident_id, route = _stored_incident(client)
        other = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
        assert store_known_occurrence(postgres_db.autocommit_engine, "no-such-route", _occurrence(),
                                      {("gpu", "a100")}, datetime.now(UTC)) is None
        assert client.post(f"/incidents/{incident_id}/merge", json={"into": other}).status_code == 200
        # the merge moved the fingerprint: the route now leads to the live incident
        stored = store_known_occurrence(postgres_db.autocommit_engine, route, _occurrence(),
                                        set(), datetime.now(UTC))
    assert stored is not None and stored[0].id == other
    with postgres_db.write() as s:  # a merge chain made by hand: the route's incident is not live
        s.execute(Incident.__table__.update().where(Incident.id == other).values(merged_into_id=incident_id))
    assert store_known_occurrence(postgres_db.autocommit_engine, route, _occurrence(),
                                  {("gpu", "a100")}, datetime.now(UTC)) is None
    with postgres_db.read() as s:
        counts = dict(s.execute(select(Incident.id, Incident.occurrence_count)).all())
        occurrences = len(s.execute(select(Occurrence.id)).all())
    assert occurrences == 3  # the 2 uploads and the statement that found `other` live
    assert counts[other] == 3  # its upload, the merged incident's and the statement's


def test_a_repeat_upload_is_one_statement_and_answers_like_the_first(postgres_db):
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(statement.lstrip().split(None, 1)[0].upper())

    with api_client(postgres_db) as client:
        first = upload(client, vllm_log(), reporter="ana").json()
        event.listen(postgres_db.engine, "before_cursor_execute", record)
        try:
            again = upload(client, vllm_log(), reporter="ana")
        finally:
            event.remove(postgres_db.engine, "before_cursor_execute", record)
    assert again.status_code == 200
    assert statements == ["WITH"]
    body = again.json()
    assert body["incident"]["id"] == first["incident"]["id"]
    assert body["incident"]["occurrences"] == 2
    assert body["match"]["status"] == "known" and body["match"]["score"] == 100.0
    assert body["match"]["explanation"][0].startswith("fingerprint identical")
    assert body["analysis"] == first["analysis"]
    assert body["fixes"] == [] and body["recommendation"]["path"] == "investigate"
    assert _row(postgres_db, body["occurrence"]["id"])["reporter"] == "ana"


def test_a_taken_idempotency_key_fails_whole(postgres_db):
    """A retry racing the first upload: the unique key fails the statement, and with it
    the counter update and the facets (the general path then answers the retry)."""
    from sqlalchemy.exc import IntegrityError

    with api_client(postgres_db) as client:
        incident_id, route = _stored_incident(client)
    when = datetime.now(UTC)
    store_known_occurrence(postgres_db.autocommit_engine, route, _occurrence(idempotency_key="k-1"),
                           set(), when)
    with pytest.raises(IntegrityError):
        store_known_occurrence(postgres_db.autocommit_engine, route,
                               _occurrence(idempotency_key="k-1"), {("gpu", "a100")}, when)
    with postgres_db.read() as s:
        count = s.execute(select(Incident.occurrence_count).where(Incident.id == incident_id)).scalar_one()
        facets = s.execute(select(IncidentFacet.value).where(IncidentFacet.kind == "gpu")).scalars().all()
    assert count == 2 and "a100" not in facets


def test_psycopg_caches_the_statements_conversion():
    """psycopg converts placeholders once per statement only when the statement fits its
    cache; beyond that every upload pays the conversion again (~0.5 ms here)."""
    import re

    from psycopg import _queries

    from kb.db.known_upload import _SQL

    assert len(_SQL) <= _queries.MAX_CACHED_STATEMENT_LENGTH
    assert len(set(re.findall(r"%\((\w+)\)", _SQL))) <= _queries.MAX_CACHED_STATEMENT_PARAMS
