"""PATCH /fixes/{id}: edit a fix, user-added or seeded, on SQLite and Postgres; and what
re-seeding does to a seeded fix someone edited."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kb.services.seeding import seed_database
from tests.service.helpers import SAMPLE_SEEDS, api_client, upload
from tests.service.logs import vllm_log


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


@pytest.fixture
def seeds(tmp_path: Path) -> Path:
    target = tmp_path / "seeds"
    shutil.copytree(SAMPLE_SEEDS, target)
    return target


def _fix(client, incident_id: int, fix_id: int) -> dict:
    return next(f for f in client.get(f"/incidents/{incident_id}").json()["fixes"]
                if f["id"] == fix_id)


def test_edit_a_fix(client):
    incident_id = upload(client, vllm_log()).json()["incident"]["id"]
    fix = client.post(f"/incidents/{incident_id}/fixes",
                      json={"title": "Lower utilization", "kind": "config",
                            "description": "old", "change": {"flags": ["--gpu-memory-utilization 0.8"]}}).json()
    client.post(f"/fixes/{fix['id']}/outcomes", json={"worked": True})
    assert fix["edited_at"] is None

    edited = client.patch(f"/fixes/{fix['id']}", json={
        "title": "  Raise utilization  ", "kind": "workaround",
        "change": {"env": {"VLLM_GPU_MEMORY_UTILIZATION": 0.95}}, "applies_to": {"engine": "vllm"}})
    assert edited.status_code == 200, edited.text
    body = edited.json()
    assert body["title"] == "Raise utilization" and body["kind"] == "workaround"
    assert body["description"] == "old"  # not given: kept
    assert body["change"] == {"env": {"VLLM_GPU_MEMORY_UTILIZATION": 0.95}}
    assert body["applies_to"] == {"engine": "vllm"} and body["edited_at"]
    assert body["worked"] == 1  # outcomes stay with the fix
    assert _fix(client, incident_id, fix["id"])["title"] == "Raise utilization"
    cleared = client.patch(f"/fixes/{fix['id']}", json={"description": ""}).json()
    assert cleared["description"] is None and cleared["title"] == "Raise utilization"

    for bad in ({"kind": "prayer"}, {"title": "  "}, {"change": "x=1"}, {"applies_to": [1]}):
        response = client.patch(f"/fixes/{fix['id']}", json=bad)
        assert response.status_code == 400, (bad, response.text)
    assert client.patch("/fixes/999999", json={"title": "x"}).status_code == 404
    assert client.patch(f"/fixes/{fix['id']}", content=b"{nope",
                        headers={"Content-Type": "application/json"}).status_code == 400
    assert _fix(client, incident_id, fix["id"])["kind"] == "workaround"


def test_editing_a_fix_needs_the_token_when_tokens_are_set(db):
    with api_client(db) as open_client:
        incident_id = upload(open_client, vllm_log()).json()["incident"]["id"]
        fix_id = open_client.post(f"/incidents/{incident_id}/fixes",
                                  json={"title": "t", "kind": "config", "change": {"flags": ["--enforce-eager"]}}).json()["id"]
    with api_client(db, api_tokens=("s3cret",)) as client:
        denied = client.patch(f"/fixes/{fix_id}", json={"title": "changed"})
        assert denied.status_code == 401
        assert _fix(client, incident_id, fix_id)["title"] == "t"
        ok = client.patch(f"/fixes/{fix_id}", json={"title": "changed"},
                          headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["title"] == "changed"


def test_an_edited_seeded_fix_survives_reseeding(db, seeds):
    seed_database(db, seeds)
    path = seeds / "vllm" / "sample-kv-cache-no-memory.yaml"
    with api_client(db) as client:
        iid = client.get("/incidents", params={"q": "kv-cache-no-memory"}).json()["items"][0]["id"]
        detail = client.get(f"/incidents/{iid}").json()
        assert detail["analysis"] is None  # a curated incident nobody uploaded yet
        seeded = [f for f in detail["fixes"] if f["seeded"]]
        by_title = {f["title"]: f for f in seeded}
        # seed fixes are keyed by position: ours is the last one, so dropping it below
        # does not shift the others' keys
        ours = by_title["Lower --max-model-len"]
        other = by_title["Raise --gpu-memory-utilization"]
        edited = client.patch(f"/fixes/{ours['id']}", json={"description": "Ours: use 0.92."})
        assert edited.status_code == 200 and edited.json()["seeded"] is True

        # an unchanged seed file changes nothing
        report = seed_database(db, seeds)
        assert not report.changed
        assert _fix(client, iid, ours["id"])["description"] == "Ours: use 0.92."

        # a changed seed file: the edited fix keeps its text (a warning says so), takes
        # the seed's curated counts; the unedited seeded fix takes the seed's new text
        data = yaml.safe_load(path.read_text())
        data["fixes"][1]["description"] = "Seed: use 16384."
        data["fixes"][1]["worked"] = 5
        data["fixes"][0]["description"] = "Seed: more memory."
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        report = seed_database(db, seeds)
        assert report.updated == 1
        assert any(f"fix #{ours['id']}" in w and "description" in w for w in report.warnings)
        kept = _fix(client, iid, ours["id"])
        assert kept["description"] == "Ours: use 0.92." and kept["worked"] == 5
        assert _fix(client, iid, other["id"])["description"] == "Seed: more memory."

        # dropped from the seed, the edited fix stays
        data["fixes"] = data["fixes"][:1]
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        report = seed_database(db, seeds)
        assert report.fixes_removed == 0
        assert any(f"fix #{ours['id']}" in w and "kept" in w for w in report.warnings)
        assert _fix(client, iid, ours["id"])["description"] == "Ours: use 0.92."
