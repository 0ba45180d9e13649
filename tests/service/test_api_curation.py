"""Listing, detail, editing, fixes, outcomes and merges through the API, on SQLite and
Postgres."""

from __future__ import annotations

import pytest

from tests.service.helpers import BASE_URL, api_client, upload
from tests.service.logs import HEADS, NCCL, vllm_log


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def _path(url: str) -> str:
    return url.removeprefix(BASE_URL)


def test_a_known_crash_in_a_new_context_adds_its_facets_once(client):
    """The second upload of a crash lands on the same incident; the GPU and
    architecture it adds are listed and filter, the ones already there stay single."""
    first = upload(client, vllm_log(), model_arch="kimi_k2", gpu="NVIDIA H100 80GB HBM3").json()
    again = upload(client, vllm_log(), model_arch="kimi_k2", gpu="NVIDIA H100 80GB HBM3").json()
    other = upload(client, vllm_log(), model_arch="llama", gpu="NVIDIA A100-SXM4-80GB").json()
    incident_id = first["incident"]["id"]
    assert again["incident"]["id"] == other["incident"]["id"] == incident_id
    assert other["incident"]["occurrences"] == 3
    row = client.get("/incidents").json()["items"][0]
    assert sorted(row["model_archs"]) == ["kimi_k2", "llama"]
    assert sorted(row["gpus"]) == ["nvidia a100-sxm4-80gb", "nvidia h100 80gb hbm3"]
    for params in ({"gpu": "a100"}, {"gpu": "hopper"}, {"model_arch": "llama"}):
        items = client.get("/incidents", params=params).json()["items"]
        assert [i["id"] for i in items] == [incident_id], params


def test_list_search_filters_and_paging(client):
    a = upload(client, vllm_log(), model_arch="kimi_k2", gpu="NVIDIA H100 80GB HBM3").json()
    b = upload(client, vllm_log(**NCCL), engine_version="0.10.1", gpu="NVIDIA A100-SXM4-80GB").json()
    c = upload(client, vllm_log(**HEADS), engine_version="0.9.2").json()
    ids = {x["incident"]["id"] for x in (a, b, c)}

    everything = client.get("/incidents").json()
    assert everything["total"] == 3 and {i["id"] for i in everything["items"]} == ids
    item = everything["items"][0]
    assert {"id", "url", "title", "occurrences", "fixes", "recommended_path", "last_seen",
            "versions", "model_archs", "gpus", "timeline"} <= set(item)
    rows = {i["id"]: i for i in everything["items"]}
    row_a, row_b = rows[a["incident"]["id"]], rows[b["incident"]["id"]]
    assert row_a["model_archs"] == ["kimi_k2"] and row_a["gpus"] == ["nvidia h100 80gb hbm3"]
    assert row_b["versions"] == ["0.10.1"] and row_b["gpus"] == ["nvidia a100-sxm4-80gb"]
    assert row_b["timeline"]["days"] == len(row_b["timeline"]["counts"]) == 30
    assert row_b["timeline"]["counts"][-1] == 1 and sum(row_b["timeline"]["counts"]) == 1

    def ids_for(**params):
        response = client.get("/incidents", params=params)
        assert response.status_code == 200, response.text
        return {i["id"] for i in response.json()["items"]}

    assert ids_for(q="nccl") == {b["incident"]["id"]}
    assert ids_for(q="ATTENTION HEADS") == {c["incident"]["id"]}
    assert ids_for(engine="vllm") == ids
    assert ids_for(engine="sglang") == set()
    assert ids_for(model_arch="kimi_k2") == {a["incident"]["id"]}
    assert ids_for(gpu="a100") == {b["incident"]["id"]}
    assert ids_for(gpu="hopper") == {a["incident"]["id"], c["incident"]["id"]}
    assert ids_for(version="0.10") == {b["incident"]["id"]}
    assert ids_for(version="0.9.2") == {c["incident"]["id"]}
    assert ids_for(has_fix="true") == set()
    assert ids_for(has_fix="false") == ids
    assert ids_for(path="investigate") == ids

    page1 = client.get("/incidents", params={"per_page": 2, "page": 1, "sort": "id"}).json()
    page2 = client.get("/incidents", params={"per_page": 2, "page": 2, "sort": "id"}).json()
    assert page1["total"] == page2["total"] == 3
    assert len(page1["items"]) == 2 and len(page2["items"]) == 1
    assert not {i["id"] for i in page1["items"]} & {i["id"] for i in page2["items"]}


@pytest.mark.parametrize("params", [{"page": 0}, {"per_page": 1000}, {"path": "reboot"},
                                    {"phase": "lunch"}, {"sort": "random"}, {"has_fix": "maybe"}])
def test_bad_list_parameters_are_400(client, params):
    assert client.get("/incidents", params=params).status_code == 400


def test_detail_patch_and_404(client):
    body = upload(client, vllm_log()).json()
    url = _path(body["incident"]["url"])
    detail = client.get(url).json()
    assert detail["occurrence_count"] == 1 and len(detail["occurrences"]) == 1
    # the newest occurrence's stored analysis, as the upload answered it
    assert detail["analysis"] == body["analysis"]
    assert detail["analysis"]["root_cause"]["exception"]
    newer = upload(client, vllm_log(seed=4)).json()
    assert client.get(url).json()["analysis"] == newer["analysis"]
    assert detail["fingerprints"][0]["hash"] == body["analysis"]["fingerprint"]["hash"]
    assert detail["recommendation"]["path"] == "investigate"

    patched = client.patch(url, json={"title": "KV cache does not fit", "notes": "seen on H100",
                                      "tags": ["Memory", "kv-cache", "memory"]})
    assert patched.status_code == 200, patched.text
    assert patched.json()["title"] == "KV cache does not fit"
    assert patched.json()["tags"] == ["memory", "kv-cache"]
    assert client.get("/incidents", params={"tag": "kv-cache"}).json()["total"] == 1
    assert client.patch(url, json={"title": "  "}).status_code == 400
    assert client.patch(url, json={"tags": "memory"}).status_code == 400

    assert client.get("/incidents/999999").status_code == 404
    assert client.patch("/incidents/999999", json={"title": "x"}).status_code == 404
    assert client.get("/incidents/not-a-number").status_code in (400, 404)


def test_fixes_outcomes_and_recommendation(client):
    body = upload(client, vllm_log(), engine_version="0.11.0", model_arch="kimi_k2").json()
    incident_id = body["incident"]["id"]
    fix = client.post(f"/incidents/{incident_id}/fixes", json={
        "title": "Raise --gpu-memory-utilization", "kind": "config",
        "description": "more memory for the KV cache",
        "change": {"flags": ["--gpu-memory-utilization 0.95"]}})
    assert fix.status_code == 201, fix.text
    fix_id = fix.json()["id"]
    assert fix.json()["worked"] == 0 and fix.json()["failed"] == 0

    outcome = client.post(f"/fixes/{fix_id}/outcomes", json={
        "worked": True, "note": "fixed it", "engine_version": "0.11.0", "model_arch": "kimi_k2",
        "gpu": "H100"})
    assert outcome.status_code == 201, outcome.text
    assert outcome.json()["fix"]["worked"] == 1

    again = upload(client, vllm_log(), engine_version="0.11.0", model_arch="kimi_k2").json()
    assert again["fixes"][0]["id"] == fix_id
    assert again["fixes"][0]["worked"] == 1 and again["fixes"][0]["worked_here"] == 1
    assert again["recommendation"]["path"] == "patch"
    assert again["recommendation"]["fix_id"] == fix_id
    assert "worked" in again["recommendation"]["reason"]
    assert client.get("/incidents", params={"path": "patch"}).json()["total"] == 1
    assert client.get("/incidents", params={"has_fix": "true"}).json()["total"] == 1

    assert client.post(f"/incidents/{incident_id}/fixes",
                       json={"title": "x", "kind": "prayer"}).status_code == 400
    assert client.post(f"/incidents/{incident_id}/fixes", json={"kind": "config"}).status_code == 400
    assert client.post("/incidents/999999/fixes",
                       json={"title": "x", "kind": "config", "change": {"flags": ["--enforce-eager"]}}).status_code == 404
    assert client.post("/fixes/999999/outcomes", json={"worked": True}).status_code == 404
    assert client.post(f"/fixes/{fix_id}/outcomes", json={"note": "no verdict"}).status_code == 400
    assert client.post(f"/fixes/{fix_id}/outcomes", content=b"not json",
                       headers={"Content-Type": "application/json"}).status_code == 400


def test_fix_that_worked_here_outranks_one_that_worked_elsewhere(client):
    body = upload(client, vllm_log(), engine_version="0.11.0", model_arch="kimi_k2").json()
    incident_id = body["incident"]["id"]
    elsewhere = client.post(f"/incidents/{incident_id}/fixes",
                            json={"title": "Elsewhere fix", "kind": "config", "change": {"flags": ["--enforce-eager"]}}).json()["id"]
    here = client.post(f"/incidents/{incident_id}/fixes",
                       json={"title": "Here fix", "kind": "patch", "change": {"diff": "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"}}).json()["id"]
    for _ in range(3):
        client.post(f"/fixes/{elsewhere}/outcomes",
                    json={"worked": True, "engine_version": "0.8.5", "model_arch": "llama"})
    client.post(f"/fixes/{here}/outcomes",
                json={"worked": True, "engine_version": "0.11.0", "model_arch": "kimi_k2"})
    answer = upload(client, vllm_log(), engine_version="0.11.0", model_arch="kimi_k2").json()
    assert [f["id"] for f in answer["fixes"]] == [here, elsewhere]
    assert answer["recommendation"]["fix_id"] == here
    # a crash from the other context ranks the other way round
    other = upload(client, vllm_log(), engine_version="0.8.5", model_arch="llama").json()
    assert [f["id"] for f in other["fixes"]] == [elsewhere, here]


def test_failing_in_engine_fixes_recommend_switching(client):
    incident_id = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    patch_id = client.post(f"/incidents/{incident_id}/fixes",
                           json={"title": "NCCL_P2P_DISABLE=1", "kind": "workaround",
                                 "change": {"env": {"NCCL_P2P_DISABLE": "1"}}}).json()["id"]
    switch_id = client.post(f"/incidents/{incident_id}/fixes", json={
        "title": "Serve it with SGLang", "kind": "switch_engine",
        "change": {"engine": "sglang", "engine_version": ">=0.5.4"}}).json()["id"]
    for _ in range(2):
        client.post(f"/fixes/{patch_id}/outcomes", json={"worked": False, "note": "still crashes"})
    answer = upload(client, vllm_log(**NCCL)).json()
    rec = answer["recommendation"]
    assert rec["path"] == "switch_engine"
    assert rec["fix_id"] == switch_id
    assert rec["engine"] == "sglang" and rec["engine_version"] == ">=0.5.4"
    assert "failed" in rec["reason"]


def test_merge_moves_everything_and_later_uploads_land_on_the_target(client):
    target = upload(client, vllm_log()).json()["incident"]["id"]
    dup = upload(client, vllm_log(**HEADS)).json()["incident"]["id"]
    fix_id = client.post(f"/incidents/{dup}/fixes", json={"title": "f", "kind": "config", "change": {"flags": ["--enforce-eager"]}}).json()["id"]
    merged = client.post(f"/incidents/{dup}/merge", json={"into": target})
    assert merged.status_code == 200, merged.text
    detail = merged.json()
    assert detail["id"] == target
    assert detail["occurrence_count"] == 2
    assert {f["id"] for f in detail["fixes"]} == {fix_id}
    assert len(detail["fingerprints"]) == 2

    source = client.get(f"/incidents/{dup}").json()
    assert source["merged_into"]["id"] == target
    assert {i["id"] for i in client.get("/incidents").json()["items"]} == {target}

    later = upload(client, vllm_log(**HEADS))
    assert later.status_code == 200
    assert later.json()["incident"]["id"] == target
    assert later.json()["incident"]["occurrences"] == 3

    assert client.post(f"/incidents/{target}/merge", json={"into": target}).status_code == 409
    assert client.post(f"/incidents/{dup}/merge", json={"into": target}).status_code == 409
    assert client.post(f"/incidents/{target}/merge", json={"into": 999999}).status_code == 404
    assert client.post(f"/incidents/{target}/merge", json={}).status_code == 400


def test_tiers_follow_the_scorer_similar_is_a_new_incident_listing_the_similar_one(client):
    from kb.core.analyze import analyze
    from kb.core.match import score
    from kb.core.records import CrashFeatures

    first_log = vllm_log(**HEADS)
    # Same message, another exception type: "similar" with the scorer of today.
    second_log = vllm_log("AssertionError", HEADS["message"], frames=HEADS["frames"])
    expected = score(CrashFeatures.from_analysis(analyze(second_log.encode())),
                     CrashFeatures.from_analysis(analyze(first_log.encode())))
    first = upload(client, first_log).json()
    response = upload(client, second_log)
    second = response.json()
    assert second["match"]["status"] == expected.status
    assert second["match"]["score"] == pytest.approx(expected.score)
    if expected.status == "similar":
        assert response.status_code == 201
        assert second["incident"]["id"] != first["incident"]["id"]
        assert second["match"]["incident_id"] == first["incident"]["id"]
        assert second["similar"][0]["incident_id"] == first["incident"]["id"]
        detail = client.get(f"/incidents/{second['incident']['id']}").json()
        assert first["incident"]["id"] in {s["incident_id"] for s in detail["similar"]}
    elif expected.status == "known":
        assert response.status_code == 200
        assert second["incident"]["id"] == first["incident"]["id"]
    else:
        assert response.status_code == 201 and second["match"]["incident_id"] is None


def test_an_id_in_a_body_has_the_range_of_a_path_id(client):
    """{"into": 2**63} is a 400 naming the field on SQLite and Postgres alike, not an
    OverflowError from the driver; nothing is merged."""
    incident_id = upload(client, vllm_log()).json()["incident"]["id"]
    for into in (2**63, 0, -1):
        refused = client.post(f"/incidents/{incident_id}/merge", json={"into": into})
        assert refused.status_code == 400, (into, refused.text)
        assert "into" in refused.text
    assert client.get(f"/incidents/{incident_id}").json()["merged_into"] is None


def test_unmerge_restores_both_incidents_and_later_uploads_follow_it(client):
    """Merge B into A, then unmerge B: B's occurrences and fix come back, both counts
    are right again, and a later upload of B's crash lands on B, not on A."""
    a = upload(client, vllm_log()).json()["incident"]["id"]
    b = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    upload(client, vllm_log(**NCCL, seed=3))
    fix = client.post(f"/incidents/{b}/fixes", json={"title": "Give NCCL more /dev/shm", "kind": "config",
                                                      "change": {"flags": ["--shm-size=16g"]}}).json()
    merged = client.post(f"/incidents/{b}/merge", json={"into": a})
    assert merged.status_code == 200 and merged.json()["occurrence_count"] == 3
    assert upload(client, vllm_log(**NCCL, seed=5)).json()["incident"]["id"] == a  # follows the merge

    undone = client.post(f"/incidents/{b}/unmerge")
    assert undone.status_code == 200, undone.text
    detail = undone.json()
    assert detail["merged_into"] is None and detail["occurrence_count"] == 2
    assert [f["id"] for f in detail["fixes"]] == [fix["id"]]
    assert [(m["source_id"], m["target_id"], m["undone_at"] is not None) for m in detail["merges"]] == [(b, a, True)]
    a_detail = client.get(f"/incidents/{a}").json()
    assert a_detail["occurrence_count"] == 2  # its own, and the upload that followed the merge
    assert fix["id"] not in [f["id"] for f in a_detail["fixes"]]
    later = upload(client, vllm_log(**NCCL, seed=9)).json()
    assert later["match"]["status"] == "known" and later["incident"]["id"] == b  # follows the unmerge
    again = client.post(f"/incidents/{b}/unmerge")
    assert again.status_code == 409 and "not merged" in again.json()["detail"]
    listing = {i["id"] for i in client.get("/incidents").json()["items"]}
    assert {a, b} <= listing


def test_search_takes_wildcards_literally(client):
    """`%` and `_` in a query are characters, not LIKE wildcards: a query of `%` finds
    nothing, and an underscore matches only an underscore (SQLite and Postgres)."""
    upload(client, vllm_log())
    upload(client, vllm_log(**HEADS))
    assert client.get("/incidents", params={"q": "%"}).json()["total"] == 0
    assert client.get("/incidents", params={"q": "attention heads"}).json()["total"] == 1
    assert client.get("/incidents", params={"q": "attention_heads"}).json()["total"] == 0  # _ is no space
    assert client.get("/incidents", params={"gpu": "%"}).json()["total"] == 0
