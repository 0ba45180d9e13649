"""A Postgres restart under a running service: requests on the dead connections answer
503 with Retry-After (nothing half-written), and the pool recovers by itself."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kb.db import migrate
from kb.db.session import Database
from tests.conftest import ThrowawayCluster, child_pids
from tests.service.helpers import api_client, upload
from tests.service.logs import HEADS, NCCL, vllm_log

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


def _server_pids(cluster) -> list[int]:
    """The postmaster (first line of postmaster.pid) and every process it started."""
    postmaster = int((cluster.dir / "data" / "postmaster.pid").read_text().split()[0])
    return [postmaster, *child_pids(postmaster)]


def test_a_frozen_database_gives_503_within_seconds_and_the_service_recovers(cluster):
    """Every Postgres process stopped (SIGSTOP): connections stay open and nothing
    answers. Uploads, reads and /healthz answer 503 with Retry-After within the
    deadline instead of waiting for the database; once it runs again, so do they."""
    db = Database(cluster.url, pool_size=2)
    migrate.upgrade(db.engine)
    pids: list[int] = []
    try:
        with api_client(db, db_timeout=2.0) as client:  # the module's cluster: maybe stored
            assert upload(client, vllm_log()).status_code in (200, 201)
            pids = _server_pids(cluster)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            for request in (lambda: upload(client, vllm_log(**NCCL)), lambda: client.get("/healthz"),
                            lambda: client.get("/incidents")):
                started = time.monotonic()
                answer = request()
                assert answer.status_code == 503, answer.text
                assert time.monotonic() - started < 5
                assert answer.headers["retry-after"]
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            pids = []
            deadline = time.monotonic() + 30
            while client.get("/healthz").status_code != 200:
                assert time.monotonic() < deadline, "the service did not recover"
                time.sleep(0.5)
            assert upload(client, vllm_log(**HEADS)).status_code in (200, 201)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        db.dispose()
