"""Idempotency-Key on POST /incidents and the launch wrapper's extra fields, on SQLite and
Postgres: a retried upload (its answer was lost) gets the first answer again and stores
nothing, even when the retries race each other."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from kb.db.models import Incident, Occurrence
from kb.services.ingest import Overrides, ingest_upload
from tests.service.helpers import api_client, upload
from tests.service.logs import NCCL, vllm_log


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def _count(db, model) -> int:
    with db.read() as s:
        return s.execute(select(func.count()).select_from(model)).scalar_one()


def _send(client, log: str, key: str | None, **fields):
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post("/incidents", files={"log": ("vllm.log", log.encode(), "text/plain")},
                       data={k: str(v) for k, v in fields.items()}, headers=headers)


def test_the_same_key_twice_stores_one_occurrence_and_answers_the_first_answer(client, db):
    first = _send(client, vllm_log(), "k-0123456789abcdef")
    assert first.status_code == 201, first.text
    again = _send(client, vllm_log(), "k-0123456789abcdef")
    assert again.status_code == 200, again.text
    a, b = first.json(), again.json()
    assert b["incident"]["id"] == a["incident"]["id"]
    assert b["occurrence"]["id"] == a["occurrence"]["id"]
    assert b["analysis"] == a["analysis"]
    assert b["match"]["status"] == a["match"]["status"] == "new"
    assert (a["replayed"], b["replayed"]) == (False, True)
    assert b["incident"]["occurrences"] == 1 and b["recommendation"]["path"]
    assert _count(db, Occurrence) == 1 and _count(db, Incident) == 1

    # a known crash with a new key is stored; its retry is answered, not stored
    known = _send(client, vllm_log(seed=3), "k-second")
    assert known.status_code == 200 and known.json()["match"]["status"] == "known"
    retry = _send(client, vllm_log(seed=3), "k-second")
    assert retry.status_code == 200 and retry.json()["replayed"] is True
    assert retry.json()["occurrence"]["id"] == known.json()["occurrence"]["id"]
    assert retry.json()["match"]["incident_id"] == a["incident"]["id"]
    assert _count(db, Occurrence) == 2
    # without a key (or with a blank one), every upload is stored
    assert _send(client, vllm_log(), None).status_code == 200
    assert _send(client, vllm_log(), "  ").status_code == 200
    assert _count(db, Occurrence) == 4
    assert client.get(f"/incidents/{a['incident']['id']}").json()["occurrence_count"] == 4


def test_a_replay_follows_a_merge_of_the_incident(client, db):
    a = _send(client, vllm_log(), "k-a").json()
    b = _send(client, vllm_log(**NCCL), "k-b").json()
    merged = client.post(f"/incidents/{b['incident']['id']}/merge",
                         json={"into": a["incident"]["id"]})
    assert merged.status_code == 200
    again = _send(client, vllm_log(**NCCL), "k-b")
    assert again.status_code == 200
    assert again.json()["incident"]["id"] == a["incident"]["id"]
    assert again.json()["occurrence"]["id"] == b["occurrence"]["id"]
    assert _count(db, Occurrence) == 2


@pytest.mark.parametrize("key", ["x" * 201, "caf\u00e9", "tab\there"])
def test_a_malformed_key_is_400_and_stores_nothing(client, db, key):
    response = client.post("/incidents", content=vllm_log().encode(),
                           headers={"Content-Type": "text/plain",
                                    "Idempotency-Key": key.encode("utf-8")})
    assert response.status_code == 400, response.text
    assert "Idempotency-Key" in response.json()["detail"]
    assert _count(db, Occurrence) == 0


def test_concurrent_retries_with_one_key_store_one_occurrence(db):
    """Retries of one upload racing across threads (as across service processes on one
    Postgres): the unique key lets one insert win, the others answer its occurrence."""
    threads = 6
    data = vllm_log(**NCCL).encode()
    barrier = threading.Barrier(threads)
    results, errors = [], []

    def worker():
        try:
            barrier.wait(timeout=30)
            results.append(ingest_upload(db, data, Overrides(), idempotency_key="same-key"))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=120)
    assert errors == []
    assert len(results) == threads
    assert len({r.occurrence.id for r in results}) == 1
    assert len({r.incident.id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert sum(r.replayed for r in results) == threads - 1
    assert _count(db, Occurrence) == 1 and _count(db, Incident) == 1
    with db.read() as s:
        assert s.execute(select(Incident.occurrence_count)).scalar_one() == 1


def test_launch_wrapper_fields_are_kept_with_the_occurrence(client):
    body = upload(client, vllm_log(), cuda_visible_devices="0,1", torch_version="2.8.0+cu128",
                  failure="hang", exit_code=1).json()
    detail = client.get(f"/incidents/{body['incident']['id']}").json()
    occurrence = detail["occurrences"][0]
    assert occurrence["cuda_visible_devices"] == "0,1"
    assert occurrence["torch_version"] == "2.8.0+cu128"
    assert occurrence["failure"] == "hang" and occurrence["exit_code"] == 1
    plain = upload(client, vllm_log(seed=2)).json()
    newest = client.get(f"/incidents/{plain['incident']['id']}").json()["occurrences"][0]
    assert (newest["cuda_visible_devices"], newest["torch_version"], newest["failure"]) == (None,) * 3
    bad = upload(client, vllm_log(), failure="exploded")
    assert bad.status_code == 400 and "failure must be one of" in bad.json()["detail"]
    schema = client.get("/schema/openapi.json").text
    assert "cuda_visible_devices" in schema and "Idempotency-Key" in schema
