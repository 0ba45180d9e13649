"""Notifications end to end, on SQLite and Postgres, against a real HTTP receiver on
127.0.0.1: a new incident, a regression and a spike are each delivered exactly once, a
receiver that is down is retried until it is up, a slow or absent receiver does not
slow uploads, and notifications survive the process that stored them."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest
from sqlalchemy import func, select

from kb.config import Settings
from kb.db.models import NotificationOutbox
from kb.services import ingest
from kb.services.delivery import Deliverer
from kb.services.notifications import Notifier
from kb.services.views import Overrides
from kb.services.webhooks import event_text, parse_target
from tests.service.helpers import BASE_URL, api_client, upload
from tests.service.logs import NCCL, vllm_log
from tests.service.receiver import Receiver, wait_until


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _events(bodies):
    return sorted((b["event"], b["incident"]["id"]) for b in bodies)


def test_new_incident_spike_and_regression_are_each_delivered_once(db, receiver):
    """Both formats: JSON gets the event, Slack-style `{"text"}` its line. A spike fires
    when the threshold is reached and not again within the hour; an upload on a version
    older than the resolution is not a regression, one at or past it is (once)."""
    hooks = (f"json={receiver.url('/hook')}", f"slack={receiver.url('/slack')}")
    with api_client(db, webhooks=hooks, spike_per_hour=3, webhook_retry_seconds=0.2) as client:
        first = upload(client, vllm_log(), engine_version="0.8.0").json()
        incident = first["incident"]["id"]
        for _ in range(4):  # 3 in the hour: the spike; the 4th and 5th: quiet
            assert upload(client, vllm_log(), engine_version="0.8.0").json()["incident"]["id"] == incident
        resolved = client.post(f"/incidents/{incident}/resolve", json={"version": "0.8.5"})
        assert resolved.status_code == 200, resolved.text
        assert resolved.json()["status"] == "resolved" and resolved.json()["resolved_in"] == "0.8.5"
        upload(client, vllm_log(), engine_version="0.8.4")  # an old installation: no regression
        assert client.get(f"/incidents/{incident}").json()["status"] == "resolved"
        upload(client, vllm_log(), engine_version="0.9.1")  # at or past 0.8.5: a regression
        upload(client, vllm_log(), engine_version="0.9.1")  # regressed already: no second one
        detail = client.get(f"/incidents/{incident}").json()
        assert detail["status"] == "regressed" and detail["regressed_at"]
        assert [r["action"] for r in detail["resolutions"]] == ["resolved", "regressed"]
        assert detail["resolutions"][1]["version"] == "0.9.1"

        expected = [("new_incident", incident), ("regression", incident), ("spike", incident)]
        wait_until(lambda: len(receiver.bodies("/hook")) >= 3 and len(receiver.bodies("/slack")) >= 3)
        time.sleep(1.0)  # anything sent twice would arrive by now
        bodies = receiver.bodies("/hook")
        assert _events(bodies) == expected
        assert len({b["event_id"] for b in bodies}) == 3
        by_event = {b["event"]: b for b in bodies}
        assert by_event["spike"]["spike"]["occurrences"] == 3
        assert by_event["regression"]["occurrence"]["engine_version"] == "0.9.1"
        assert by_event["regression"]["incident"]["resolved_in"] == "0.8.5"
        assert by_event["new_incident"]["incident"]["url"] == f"{BASE_URL}/incidents/{incident}"
        texts = sorted(b["text"] for b in receiver.bodies("/slack"))
        assert len(texts) == 3
        assert all(set(b) == {"text"} for b in receiver.bodies("/slack"))
        assert any(t.startswith("Crash KB: Regression: #") and "0.9.1" in t for t in texts)
        assert any(t.startswith("Crash KB: New crash: #") for t in texts)
        assert any(t.startswith("Crash KB: Spike: #") for t in texts)
        headers = [h for p, h, _ in receiver.received if p == "/hook"]
        assert {h.get("X-KB-Event") or h.get("x-kb-event") for h in headers} == {
            "new_incident", "regression", "spike"}

        log = client.get("/notifications").json()
        assert sorted(n["status"] for n in log["notifications"]) == ["delivered"] * 6
        assert all(d["ok"] and d["status_code"] == 200 for d in log["deliveries"])
        assert len(log["deliveries"]) == 6
        assert all("127.0.0.1" in w and "/hook" not in w for w in log["webhooks"])
        page = client.get("/ui/notifications").text
        assert page.count("<td>delivered") == 6  # the notifications
        assert page.count('<span class="ok">delivered</span> HTTP 200') == 6  # the attempts
        assert "regression" in page and "spike" in page and "/hook" not in page


def test_a_receiver_that_is_down_gets_the_notification_once_it_is_up(db):
    """Connection refused, retried with backoff; delivered after the receiver starts,
    and every failed attempt is in the delivery log with its error."""
    port = _free_port()
    hook = f"http://127.0.0.1:{port}/hook"
    with api_client(db, webhooks=(hook,), webhook_retry_seconds=0.2) as client:
        created = upload(client, vllm_log(**NCCL)).json()
        failed = wait_until(lambda: [d for d in client.get("/notifications").json()["deliveries"]
                                     if not d["ok"]][1:])
        assert all(d["status_code"] is None and "Connect" in d["error"] for d in failed)
        pending = client.get("/notifications").json()["notifications"][0]
        assert pending["status"] == "pending" and pending["attempts"] >= 2
        assert pending["next_attempt_at"]
        receiver = Receiver().start(port)
        try:
            wait_until(lambda: receiver.bodies())
            time.sleep(1.0)
            assert _events(receiver.bodies()) == [("new_incident", created["incident"]["id"])]
            log = wait_until(lambda: (lambda j: j if j["notifications"][0]["status"] == "delivered"
                                      else None)(client.get("/notifications").json()))
            attempts = [d for d in log["deliveries"]]
            assert attempts[0]["ok"] and not any(d["ok"] for d in attempts[1:])
            assert log["notifications"][0]["attempts"] == len(attempts)
        finally:
            receiver.stop()


def test_failing_receiver_is_given_up_after_max_attempts(db):
    receiver = Receiver(status=500).start()
    try:
        with api_client(db, webhooks=(receiver.url(),), webhook_retry_seconds=0.1,
                        webhook_max_attempts=3) as client:
            upload(client, vllm_log())
            log = wait_until(lambda: (lambda j: j if j["notifications"] and j["notifications"][0][
                "status"] == "failed" else None)(client.get("/notifications").json()))
            time.sleep(0.5)
            assert len(receiver.bodies()) == 3
            assert [d["status_code"] for d in log["deliveries"]] == [500, 500, 500]
            assert log["notifications"][0]["last_error"].startswith("HTTP 500")
    finally:
        receiver.stop()


@pytest.mark.parametrize("receiver_state", ["slow", "down"])
def test_a_slow_or_down_receiver_does_not_slow_uploads(db, receiver_state):
    """Every upload here makes a new incident, so a notification; the receiver takes 3 s
    to answer (or refuses). Uploads do not wait for it: each answers well within 1.5 s
    (a generous bound: one upload of these logs takes tens of ms)."""
    receiver = Receiver(delay=3.0) if receiver_state == "slow" else None
    url = receiver.start().url() if receiver else f"http://127.0.0.1:{_free_port()}/hook"
    try:
        with api_client(db, webhooks=(url,), webhook_timeout=5.0, webhook_retry_seconds=0.2) as client:
            upload(client, vllm_log())  # warm-up: imports, connections
            latencies = []
            for n in range(6):
                started = time.perf_counter()
                response = upload(client, vllm_log(exception=f"Crash{n}Error", message=f"crash {n}"))
                latencies.append(time.perf_counter() - started)
                assert response.status_code == 201, response.text
            assert max(latencies) < 1.5, latencies
            if receiver:
                wait_until(lambda: len(receiver.bodies()) == 7, timeout=30)
    finally:
        if receiver:
            receiver.stop()


def test_notifications_outlive_the_process_that_stored_them(db, receiver):
    """The outbox rows are written with the upload, before anyone delivers them: stored
    by one 'process' (no delivery task), delivered by another started later."""
    settings = Settings(database_url=db.url, webhooks=(receiver.url(),), seed=False)
    notifier = Notifier.from_settings(settings)
    prepared = ingest.prepare_upload(vllm_log().encode(), Overrides(), max_bytes=1 << 20)
    result = ingest.store_upload(db, prepared, notifier=notifier)
    with db.read() as session:
        rows = [(r.event, r.status, r.incident_id)
                for r in session.scalars(select(NotificationOutbox))]
    assert rows == [
        ("new_incident", "pending", result.incident.id)]
    assert receiver.bodies() == []

    deliverer = Deliverer(db, settings)

    async def once() -> int:
        async with httpx.AsyncClient() as client:
            return await deliverer.deliver_due(client)

    assert asyncio.run(once()) == 1
    assert _events(receiver.bodies()) == [("new_incident", result.incident.id)]
    assert asyncio.run(once()) == 0  # delivered: nothing left


def test_two_processes_share_the_outbox_without_sending_twice(db, receiver):
    """Two deliverers (as two `--workers`) claim concurrently: every notification is
    sent exactly once."""
    settings = Settings(database_url=db.url, webhooks=(receiver.url(),), seed=False)
    notifier = Notifier.from_settings(settings)
    for n in range(30):
        prepared = ingest.prepare_upload(
            vllm_log(exception=f"Shared{n}Error", message=f"m {n}").encode(), Overrides(),
            max_bytes=1 << 20)
        ingest.store_upload(db, prepared, notifier=notifier)
    receiver.delay = 0.05
    sent = [0, 0]
    barrier = threading.Barrier(2)

    def work(index: int) -> None:
        deliverer = Deliverer(db, settings)

        async def drain() -> None:
            async with httpx.AsyncClient() as client:
                barrier.wait()
                while (n := await deliverer.deliver_due(client)):
                    sent[index] += n

        asyncio.run(drain())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    bodies = receiver.bodies()
    assert len(bodies) == 30 and len({b["event_id"] for b in bodies}) == 30
    assert sum(sent) == 30
    with db.read() as session:
        assert session.execute(select(func.count()).select_from(NotificationOutbox)
                               .where(NotificationOutbox.status == "delivered")).scalar() == 30


def test_no_webhooks_no_outbox_rows_but_regressions_still_recorded(db):
    with api_client(db) as client:
        incident = upload(client, vllm_log()).json()["incident"]["id"]
        assert client.post(f"/incidents/{incident}/resolve").json()["status"] == "resolved"
        upload(client, vllm_log(), engine_version="0.1.0")  # resolved in no version: any
        assert client.get(f"/incidents/{incident}").json()["status"] == "regressed"
        assert client.get("/notifications").json() == {"webhooks": [], "notifications": [],
                                                        "deliveries": []}


def test_webhook_targets_keep_their_url_secret():
    target = parse_target("slack=https://hooks.slack.com/services/T0001/B0001/abcdefSECRET")
    assert target.format == "slack" and "SECRET" not in target.label
    assert target.label == "slack https://hooks.slack.com/…"
    assert parse_target("http://127.0.0.1:9/x").format == "json"
    text = event_text({"event": "regression", "incident": {"id": 3, "title": "OOM", "url": "u",
                                                           "resolved_in": "0.8.5"},
                       "occurrence": {"engine_version": "0.9.0"}})
    assert text == "Crash KB: Regression: #3 OOM is back on 0.9.0 (resolved in 0.8.5) <u>"
    with pytest.raises(ValueError, match="KB_WEBHOOKS"):
        Settings.from_env({"KB_WEBHOOKS": "teams=http://127.0.0.1/x"})
    with pytest.raises(ValueError, match="KB_WEBHOOKS"):
        Settings.from_env({"KB_WEBHOOKS": "ftp://127.0.0.1/x"})
    settings = Settings.from_env({"KB_WEBHOOKS": "slack=http://127.0.0.1/a, http://127.0.0.1/b",
                                  "KB_SPIKE_PER_HOUR": "0"})
    assert settings.webhooks == ("slack=http://127.0.0.1/a", "http://127.0.0.1/b")
    assert settings.spike_per_hour == 0
    assert Settings.from_env(settings.to_env()) == settings


def test_kb_serve_with_two_workers_delivers_each_notification_once(fresh_db_url, receiver, tmp_path):
    """A real `kb serve --workers 2`: both processes run a delivery task on one outbox;
    every new incident reaches the receiver exactly once."""
    import os

    from tests.conftest import kb_serve_process

    env = {**os.environ, "KB_DATABASE_URL": fresh_db_url, "KB_SEED": "0",
           "KB_LOG_LEVEL": "warning", "KB_WEBHOOKS": receiver.url()}
    env.pop("KB_API_TOKENS", None)
    with kb_serve_process(env, tmp_path / "serve.log", "--workers", "2") as base:
        with httpx.Client(base_url=base, timeout=30) as client:
            ids = set()
            for n in range(12):
                response = client.post("/incidents", files={"log": (
                    "v.log", vllm_log(exception=f"Served{n}Error", message=f"m {n}").encode())})
                assert response.status_code == 201, response.text
                ids.add(response.json()["incident"]["id"])
            wait_until(lambda: len(receiver.bodies()) >= 12, timeout=30)
            time.sleep(1.5)
            assert _events(receiver.bodies()) == sorted(("new_incident", i) for i in ids)
            log = client.get("/notifications").json()
            assert [n["status"] for n in log["notifications"]] == ["delivered"] * 12


def test_settled_notifications_are_pruned_after_the_retention(db, receiver):
    from datetime import timedelta

    from kb.db.models import NotificationDelivery, utcnow
    from kb.services.delivery import RETENTION

    settings = Settings(database_url=db.url, webhooks=(receiver.url(),), seed=False)
    notifier = Notifier.from_settings(settings)
    for n in range(3):
        prepared = ingest.prepare_upload(vllm_log(exception=f"Old{n}Error").encode(), Overrides(),
                                         max_bytes=1 << 20)
        ingest.store_upload(db, prepared, notifier=notifier)
    deliverer = Deliverer(db, settings)

    async def once() -> int:
        async with httpx.AsyncClient() as client:
            return await deliverer.deliver_due(client)

    with db.write() as session:  # one stays pending: it is never pruned
        session.get(NotificationOutbox, 3).next_attempt_at = utcnow() + timedelta(days=1)
    assert asyncio.run(once()) == 2
    with db.write() as session:
        for row in session.scalars(select(NotificationOutbox)):
            row.created_at = utcnow() - RETENTION - timedelta(days=1 if row.id != 2 else -1)
    assert deliverer.prune() == 1
    with db.read() as session:
        left = sorted((r.id, r.status) for r in session.scalars(select(NotificationOutbox)))
        attempts = session.execute(select(func.count()).select_from(NotificationDelivery)).scalar()
    assert left == [(2, "delivered"), (3, "pending")] and attempts == 1


def test_a_streamed_upload_notifies_like_a_whole_one(db, receiver):
    """A gzip body is analyzed as it streams in (kb.services.streamupload): its new
    incident is announced all the same."""
    import gzip

    with api_client(db, webhooks=(f"json={receiver.url('/hook')}",), webhook_retry_seconds=0.2) as client:
        stored = upload(client, gzip.compress(vllm_log(**NCCL).encode())).json()
        wait_until(lambda: len(receiver.bodies("/hook")) >= 1)
        assert _events(receiver.bodies("/hook")) == [("new_incident", stored["incident"]["id"])]
