"""Resolving and reopening incidents through the API, and the regressions uploads make,
on SQLite and Postgres (Postgres stores repeats of known crashes by its fast path:
a resolved incident must leave it, so that its regressions are seen)."""

from __future__ import annotations

import pytest

from tests.service.helpers import api_client, upload
from tests.service.logs import NCCL, vllm_log


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def _status(client, incident_id):
    return client.get(f"/incidents/{incident_id}").json()["status"]


def test_resolved_in_a_version_regresses_at_or_past_it_only(client):
    incident = upload(client, vllm_log(), engine_version="0.8.0").json()["incident"]["id"]
    assert _status(client, incident) == "open"
    upload(client, vllm_log(), engine_version="0.8.0")  # stored on the fast path on Postgres
    resolved = client.post(f"/incidents/{incident}/resolve", json={"version": "v0.8.5"}).json()
    assert (resolved["status"], resolved["resolved_in"]) == ("resolved", "0.8.5")
    assert resolved["resolved_at"] and resolved["regressed_at"] is None

    for old in ("0.8.4", "0.8.5rc1"):
        answer = upload(client, vllm_log(), engine_version=old).json()
        assert answer["incident"]["id"] == incident
        assert _status(client, incident) == "resolved", old
    upload(client, vllm_log(), engine_version="0.10.0")  # 0.10 > 0.8 as versions, not text
    detail = client.get(f"/incidents/{incident}").json()
    assert detail["status"] == "regressed" and detail["resolved_in"] == "0.8.5"
    assert detail["occurrence_count"] == 5
    steps = [(r["action"], r["version"]) for r in detail["resolutions"]]
    assert steps == [("resolved", "0.8.5"), ("regressed", "0.10.0")]
    assert detail["resolutions"][1]["occurrence_id"] == detail["occurrences"][0]["id"]

    listed = client.get("/incidents", params={"status": "regressed"}).json()
    assert [i["id"] for i in listed["items"]] == [incident]
    assert listed["items"][0]["status"] == "regressed"
    assert client.get("/incidents", params={"status": "resolved"}).json()["items"] == []
    assert client.get("/incidents", params={"status": "gone"}).status_code == 400

    reopened = client.post(f"/incidents/{incident}/reopen").json()
    assert reopened["status"] == "open" and reopened["resolved_in"] is None
    assert [r["action"] for r in reopened["resolutions"]] == ["resolved", "regressed", "reopened"]
    upload(client, vllm_log(), engine_version="0.10.0")
    assert _status(client, incident) == "open"  # open: an occurrence is just an occurrence


def test_without_a_version_every_later_occurrence_regresses(client):
    incident = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    assert client.post(f"/incidents/{incident}/resolve").json()["resolved_in"] is None
    upload(client, vllm_log(**NCCL), engine_version="0.1.0")
    assert _status(client, incident) == "regressed"


def test_an_occurrence_without_a_version_regresses_a_versioned_resolution(client):
    incident = upload(client, vllm_log()).json()["incident"]["id"]
    client.post(f"/incidents/{incident}/resolve", json={"version": "0.8.5"})
    log = vllm_log().replace("version 0.11.0", "version ?").replace("(v0.11.0)", "")
    answer = upload(client, log).json()
    assert answer["incident"]["id"] == incident
    assert answer["analysis"]["context"]["engine_version"] is None
    assert _status(client, incident) == "regressed"


def test_resolve_by_a_fix_takes_its_version(client):
    incident = upload(client, vllm_log()).json()["incident"]["id"]
    upgrade = client.post(f"/incidents/{incident}/fixes", json={
        "title": "Upgrade vLLM", "kind": "upgrade", "change": {"version": "0.9.2"}}).json()
    config = client.post(f"/incidents/{incident}/fixes", json={
        "title": "Less memory", "kind": "config",
        "change": {"flags": ["--gpu-memory-utilization 0.85"]}}).json()
    resolved = client.post(f"/incidents/{incident}/resolve", json={"fix_id": upgrade["id"]}).json()
    assert resolved["resolved_in"] == "0.9.2"
    assert resolved["resolutions"][-1] == {**resolved["resolutions"][-1], "fix_id": upgrade["id"],
                                           "version": "0.9.2", "action": "resolved"}
    refused = client.post(f"/incidents/{incident}/resolve", json={"fix_id": config["id"]})
    assert refused.status_code == 400 and "version" in refused.json()["detail"]
    both = client.post(f"/incidents/{incident}/resolve",
                       json={"fix_id": config["id"], "version": "0.9.3"}).json()
    assert both["resolved_in"] == "0.9.3"


def test_bad_resolutions_are_clear_4xx(client):
    incident = upload(client, vllm_log()).json()["incident"]["id"]
    other = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    fix = client.post(f"/incidents/{other}/fixes", json={
        "title": "Upgrade", "kind": "upgrade", "change": {"version": "0.9.2"}}).json()
    cases = [
        (f"/incidents/{incident}/resolve", {"version": "latest"}, 400),
        (f"/incidents/{incident}/resolve", {"version": "0.8.5; rm -rf"}, 400),
        (f"/incidents/{incident}/resolve", {"version": 3}, 400),
        (f"/incidents/{incident}/resolve", {"fix_id": fix["id"]}, 400),  # another incident's
        (f"/incidents/{incident}/resolve", {"fix_id": 0}, 400),
        ("/incidents/999999/resolve", {}, 404),
        (f"/incidents/{incident}/reopen", None, 409),  # open already
        ("/incidents/999999/reopen", None, 404),
    ]
    for path, body, status in cases:
        response = client.post(path, json=body) if body is not None else client.post(path)
        assert response.status_code == status, (path, body, response.text)
        assert response.json()["detail"]
    assert _status(client, incident) == "open"
    client.post(f"/incidents/{other}/merge", json={"into": incident})
    merged = client.post(f"/incidents/{other}/resolve")
    assert merged.status_code == 409 and f"#{incident}" in merged.json()["detail"]


def test_resolve_needs_the_token_when_tokens_are_set(db):
    with api_client(db, api_tokens=("s3cret",)) as client:
        stored = client.post("/incidents", files={"log": ("v.log", vllm_log().encode())},
                             headers={"Authorization": "Bearer s3cret"}).json()
        path = f"/incidents/{stored['incident']['id']}/resolve"
        assert client.post(path).status_code == 401
        assert client.post(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_the_text_report_and_the_pages_say_regression(client):
    incident = upload(client, vllm_log()).json()["incident"]["id"]
    page = client.get(f"/ui/incidents/{incident}").text
    assert f'action="/ui/incidents/{incident}/resolve"' in page and "Status: open" in page
    done = client.post(f"/ui/incidents/{incident}/resolve", data={"version": "0.8.5"},
                       follow_redirects=False)
    assert done.status_code == 303 and "done=resolved" in done.headers["location"]
    assert "resolved in 0.8.5" in client.get(f"/incidents/{incident}", params={"format": "text"}).text
    assert client.post(f"/ui/incidents/{incident}/resolve", data={"version": "soon"}).status_code == 400
    assert client.post(f"/ui/incidents/{incident}/resolve", data={"fix_id": "x"}).status_code == 400
    upload(client, vllm_log(), engine_version="0.9.0")
    text = client.get(f"/incidents/{incident}", params={"format": "text"}).text
    assert "REGRESSION: occurred again after it was resolved (resolved in 0.8.5)" in text
    listed = client.get("/incidents", params={"format": "text", "status": "regressed"}).text
    assert f"#{incident}" in listed and "[regressed] " in listed
    page = client.get(f"/ui/incidents/{incident}").text
    assert "Status: regressed" in page and 'role="alert"' in page
    assert f'action="/ui/incidents/{incident}/reopen"' in page
    listing = client.get("/ui/incidents", params={"status": "regressed"}).text
    assert f'href="/ui/incidents/{incident}"' in listing and "status-regressed" in listing
    assert "status-regressed" not in client.get("/ui/incidents", params={"status": "open"}).text
    reopened = client.post(f"/ui/incidents/{incident}/reopen", follow_redirects=False)
    assert reopened.status_code == 303 and "done=reopened" in reopened.headers["location"]
    assert _status(client, incident) == "open"
    assert client.get("/ui/notifications").status_code == 200
