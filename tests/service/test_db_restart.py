"""A Postgres restart under a running service: requests on the dead connections answer
503 with Retry-After (nothing half-written), and the pool recovers by itself."""

from __future__ import annotations

import os

import pytest

from kb.db import migrate
from kb.db.session import Database
from tests.conftest import ThrowawayCluster
from tests.service.helpers import api_client, upload
from tests.service.logs import NCCL, vllm_log

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def cluster():
    cluster = ThrowawayCluster()
    try:
        cluster.start()
    except Exception as exc:  # same policy as the shared Postgres fixture
        cluster.stop()
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"cannot start a throwaway Postgres cluster: {exc}")
        pytest.skip(f"cannot start a throwaway Postgres cluster: {exc}")
    yield cluster
    cluster.stop()


def test_service_recovers_after_a_database_restart(cluster):
    db = Database(cluster.url, pool_size=2)
    migrate.upgrade(db.engine)
    try:
        with api_client(db) as client:
            assert upload(client, vllm_log()).status_code == 201
            cluster.restart()
            answers = [upload(client, vllm_log(**NCCL)).status_code for _ in range(4)]
            # at most the requests on connections that died fail, then the pool is fresh
            assert answers[-1] in (200, 201), answers
            assert set(answers) <= {503, 200, 201}
            failed = answers.count(503)
            assert failed <= 1, answers
            listing = client.get("/incidents").json()
            assert listing["total"] == 2
            nccl = next(i for i in listing["items"] if "NCCL" in i["title"] or "nccl" in i["title"].lower())
            assert nccl["occurrences"] == 4 - failed
    finally:
        db.dispose()
