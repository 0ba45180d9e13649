"""The curated fields of the seed schema (`next`, `affected_versions`, `fixed_in`,
`engine_limitation` on incidents; `applies_to` on fixes) edited through the API and the
incident page, checked as `kb seed` checks them, on SQLite and Postgres."""

from __future__ import annotations

import pytest

from kb.services.seeding import seed_database
from tests.service.helpers import SAMPLE_SEEDS, api_client


@pytest.fixture
def client(db):
    seed_database(db, SAMPLE_SEEDS)
    with api_client(db) as c:
        yield c


def _ids(client) -> dict[str, int]:
    return {i["slug"]: i["id"] for i in client.get("/incidents").json()["items"]}


def test_curated_incident_fields_are_edited_and_shown(client):
    ids = _ids(client)
    kv, nccl = ids["sample-kv-cache-no-memory"], ids["sample-nccl-capture"]
    response = client.patch(f"/incidents/{kv}", json={
        "next": "sample-nccl-capture", "affected_versions": ">=0.10.2,<0.13", "fixed_in": "0.13.0",
        "engine_limitation": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["next"]["id"] == nccl and [c["id"] for c in body["chain"]] == [nccl]
    assert body["affected_versions"] == ">=0.10.2,<0.13" and body["fixed_in"] == "0.13.0"
    assert body["engine_limitation"] is True and body["edited_at"]
    # by number too; "" and 0 clear
    assert client.patch(f"/incidents/{kv}", json={"next": nccl}).json()["next"]["id"] == nccl
    cleared = client.patch(f"/incidents/{kv}", json={"next": 0, "fixed_in": "", "affected_versions": ""}).json()
    assert cleared["next"] is None and cleared["fixed_in"] is None and cleared["affected_versions"] is None
    assert cleared["title"] == "No memory left for the KV cache after profiling"  # untouched
    # the version filter of the list follows the edited range
    client.patch(f"/incidents/{kv}", json={"affected_versions": ">=0.10.2,<0.13"})
    listed = {i["id"] for i in client.get("/incidents", params={"version": "0.12.1", "engine": "vllm"}).json()["items"]}
    assert kv in listed


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"affected_versions": "0.10 and later"}, "affected_versions", "PEP 440 version range"),
    ({"affected_versions": ">=0.10,<"}, "affected_versions", "PEP 440 version range"),
    ({"fixed_in": "next release"}, "fixed_in", "PEP 440 version"),
    ({"next": "no-such-incident"}, "next", "is not an incident"),
    ({"next": 999999}, "next", "is not an incident"),
])
def test_bad_curated_values_get_a_400_naming_the_field(client, body, field, words):
    kv = _ids(client)["sample-kv-cache-no-memory"]
    response = client.patch(f"/incidents/{kv}", json=body)
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["detail"].startswith(f"{field}:") and words in answer["detail"]
    assert answer["extra"][0]["key"] == field
    assert client.get(f"/incidents/{kv}").json()["edited_at"] is None  # nothing written


def test_a_chain_cannot_loop(client):
    ids = _ids(client)
    heads, nccl = ids["sample-heads-not-divisible"], ids["sample-nccl-capture"]  # heads -> nccl
    response = client.patch(f"/incidents/{nccl}", json={"next": heads})
    assert response.status_code == 400 and "cannot loop" in response.json()["detail"]
    assert client.patch(f"/incidents/{nccl}", json={"next": nccl}).status_code == 400
    assert client.get(f"/incidents/{nccl}").json()["next"] is None


def test_fix_applies_to_ranges_are_checked(client):
    kv = _ids(client)["sample-kv-cache-no-memory"]
    fix = client.get(f"/incidents/{kv}").json()["fixes"][0]
    bad = client.patch(f"/fixes/{fix['id']}", json={"applies_to": {"engine_versions": "newest"}})
    assert bad.status_code == 400 and bad.json()["extra"][0]["key"] == "applies_to.engine_versions"
    good = client.patch(f"/fixes/{fix['id']}", json={"applies_to": {"engine_versions": ">=0.11"}})
    assert good.status_code == 200 and good.json()["applies_to"] == {"engine_versions": ">=0.11"}


def test_the_incident_page_edits_the_curated_fields(client):
    ids = _ids(client)
    kv, nccl = ids["sample-kv-cache-no-memory"], ids["sample-nccl-capture"]
    page = client.get(f"/ui/incidents/{kv}").text
    assert 'name="affected_versions"' in page and 'name="next"' in page and 'name="engine_limitation"' in page
    form = {"title": "No memory left for the KV cache after profiling", "notes": "", "tags": "",
            "curated": "1", "affected_versions": ">=0.9", "fixed_in": "0.11.1",
            "next": "sample-nccl-capture", "engine_limitation": "1"}
    saved = client.post(f"/ui/incidents/{kv}/edit", data=form, follow_redirects=False)
    assert saved.status_code == 303
    detail = client.get(f"/incidents/{kv}").json()
    assert (detail["affected_versions"], detail["fixed_in"], detail["next"]["id"], detail["engine_limitation"]) \
        == (">=0.9", "0.11.1", nccl, True)
    # unticking the box clears the limitation
    form.pop("engine_limitation")
    client.post(f"/ui/incidents/{kv}/edit", data=form, follow_redirects=False)
    assert client.get(f"/incidents/{kv}").json()["engine_limitation"] is False
    bad = client.post(f"/ui/incidents/{kv}/edit", data={**form, "fixed_in": "soon"}, follow_redirects=False)
    assert bad.status_code == 400 and "fixed_in" in bad.text and "PEP 440" in bad.text
    assert client.get(f"/incidents/{kv}").json()["fixed_in"] == "0.11.1"
