"""What the OpenAPI document promises is what the service does (the defects
bench/fuzz_api.py found with Schemathesis), on SQLite and Postgres: every answer form
is documented, ids are bounded exactly, OPTIONS names every method, JSON bodies are
taken at their declared types and listing enums are checked."""

from __future__ import annotations

import json

from tests.service.helpers import api_client, upload
from tests.service.logs import vllm_log


def test_the_document_lists_every_answer_form_and_exact_id_bounds(db):
    with api_client(db) as client:
        raw = client.get("/schema/openapi.json").text
        document = json.loads(raw)
    for path, method in (("/incidents", "get"), ("/incidents", "post"), ("/analyze", "post"),
                         ("/incidents/{incident_id}", "get"), ("/dashboard", "get")):
        for status, answer in document["paths"][path][method]["responses"].items():
            assert set(answer["content"]) >= {"application/json", "text/plain", "text/html"}, (path, status)
    parameter = document["paths"]["/incidents/{incident_id}"]["get"]["parameters"][0]
    assert parameter["schema"]["maximum"] == 2**63 - 1
    assert '"maximum":9223372036854775807' in raw.replace(" ", "")  # an integer, not a double


def test_options_names_every_method_of_the_path(db):
    with api_client(db) as client:
        assert client.options("/incidents").headers["allow"] == "GET, OPTIONS, POST"
        assert client.options("/incidents/1").headers["allow"] == "GET, OPTIONS, PATCH"
        assert client.options("/fixes/1").headers["allow"] == "OPTIONS, PATCH"


def test_json_bodies_are_taken_at_their_types(db):
    with api_client(db) as client:
        created = upload(client, vllm_log())
        incident = created.json()["incident"]["id"]
        fix = client.post(f"/incidents/{incident}/fixes", json={"title": "Lower the memory", "kind": "config",
                                                                 "change": {"flags": ["--x 1"]}})
        assert fix.status_code == 201, fix.text
        fix_id = fix.json()["id"]
        refused = client.post(f"/fixes/{fix_id}/outcomes", json={"worked": 0})
        assert refused.status_code == 400
        assert refused.json()["extra"][0]["key"] == "worked"
        assert client.post(f"/fixes/{fix_id}/outcomes", json={"worked": False}).status_code == 201
        assert client.post(f"/incidents/{incident}/merge", json={"into": str(incident)}).status_code == 400
        assert client.patch(f"/incidents/{incident}", json={"title": "  "}).status_code == 400
        assert client.patch(f"/fixes/{fix_id}", json={"title": ""}).status_code == 400
        assert client.patch(f"/incidents/{incident}", json={"title": "Renamed"}).status_code == 200


def test_listing_enums_are_checked(db):
    with api_client(db) as client:
        for query in ("phase=bogus", "path=bogus", "sort=bogus"):
            answer = client.get(f"/incidents?{query}", headers={"Accept": "application/json"})
            assert answer.status_code == 400, query
            assert "must be one of" in answer.json()["detail"]
        assert client.get("/incidents?phase=startup&path=patch").status_code == 200


def test_upload_overrides_are_checked_though_every_form_value_is_text(db):
    with api_client(db) as client:
        for fields, message in (({"tp": "four"}, "tp must be an integer"),
                                ({"gpu_count": "-1"}, "gpu_count is out of range"),
                                ({"failure": "null"}, "failure must be one of")):
            answer = upload(client, vllm_log(), **fields)
            assert answer.status_code == 400 and message in answer.json()["detail"], fields
        assert client.get("/incidents").json()["total"] == 0


def test_export_takes_exactly_the_incident_lists_its_document_describes(db):
    """`incidents` is documented by a pattern (ASCII numbers from 1, `#` and spaces allowed)
    and read by the same rule: what matches is exported, what does not is a 400."""
    import re

    with api_client(db, api_tokens=("admin-token",)) as client:
        raw = client.get("/schema/openapi.json").json()
        pattern = next(p for p in raw["paths"]["/export"]["get"]["parameters"]
                       if p["name"] == "incidents")["schema"]["pattern"]
        admin = {"Authorization": "Bearer admin-token"}
        a, b = (client.post("/incidents", headers=admin, files={"log": ("vllm.log", vllm_log(
            exception="ValueError", message=f"crash number {n} of the export").encode(), "text/plain")}
        ).json()["incident"]["id"] for n in (1, 2))
        for value in (f"{a}", f"#{a}, {b}", f"{a},,{b}", f" {b} "):
            assert re.match(pattern, value)
            answer = client.get("/export", params={"incidents": value}, headers=admin)
            assert answer.status_code == 200, (value, answer.text)
        unknown = client.get("/export", params={"incidents": f"{a},{b + 1000}"}, headers=admin)
        assert unknown.status_code == 404 and f"#{b + 1000}" in unknown.json()["detail"]
        for value in ("1_2", "\u0661", "x", "1;2", "0", f"{a},0", "1" * 19):
            assert not re.match(pattern, value)
            assert client.get("/export", params={"incidents": value}, headers=admin).status_code == 400, value
