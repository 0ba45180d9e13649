"""Planted secrets end to end, on SQLite and Postgres: a vLLM crash log with every kind of
secret the redaction knows planted in its launch line, env dump and traceback, uploaded
with more in every form field (the `command` of `kb run` above all). No planted value may
come back from anywhere: the upload's answer, the incident and search answers (JSON and
text), the stored log, the HTML pages, or any text column of any table."""

from __future__ import annotations

import json

from sqlalchemy import MetaData, select

from kb.db.logcodec import decompress_log
from tests.service.helpers import api_client
from tests.service.planted import ALL_SECRETS, FIELD_SECRETS, NOT_SECRETS, non_secret_log, vllm_crash_log

JSON = {"Accept": "application/json"}


def _leaks(text: str) -> list[str]:
    return [secret for secret in ALL_SECRETS if secret in text]


def _database_text(db) -> str:
    """Every value of every column of every table, stored logs decompressed."""
    metadata = MetaData()
    metadata.reflect(db.engine)
    out: list[str] = []
    with db.engine.connect() as conn:
        for table in metadata.sorted_tables:
            for row in conn.execute(select(table)):
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        try:
                            value = decompress_log(bytes(value)).decode("utf-8", "replace")
                        except ValueError:
                            value = bytes(value).decode("latin-1")
                    out.append(value if isinstance(value, str) else json.dumps(value, default=str))
    return "\n".join(out)


def _post(client, path: str, log: str, fields: dict[str, str], **headers: str):
    return client.post(path, files={"log": ("vllm.log", log.encode(), "text/plain")}, data=fields,
                       headers={**JSON, **headers})


def test_no_planted_secret_comes_back_from_anywhere(db):
    fields = {name: value for name, (value, _) in FIELD_SECRETS.items()}
    fields.update(exit_code="1", failure="exit", gpu_count="2", tp="1")
    log = vllm_crash_log()
    seen: dict[str, str] = {}
    with api_client(db) as client:
        created = _post(client, "/incidents", log, fields, **{"Idempotency-Key": "kb-run-0001"})
        assert created.status_code == 201, created.text
        answer = created.json()
        incident_id, occurrence_id = answer["incident"]["id"], answer["occurrence"]["id"]
        seen["POST /incidents"] = created.text
        assert answer["analysis"]["root_cause"]["exception"] == "huggingface_hub.errors.GatedRepoError"
        assert answer["analysis"]["redactions"] >= 40

        again = _post(client, "/incidents", log, fields)  # the same crash again: a known occurrence
        assert again.status_code == 200 and again.json()["match"]["status"] == "known"
        seen["POST /incidents (known)"] = again.text
        replay = _post(client, "/incidents", log, fields, **{"Idempotency-Key": "kb-run-0001"})
        seen["POST /incidents (replayed)"] = replay.text
        analyzed = _post(client, "/analyze", log, fields)
        assert analyzed.status_code == 200
        seen["POST /analyze"] = analyzed.text
        seen["POST /analyze (raw body)"] = client.post("/analyze", content=log.encode(),
                                                       headers={**JSON, "Content-Type": "text/plain"}).text

        detail = client.get(f"/incidents/{incident_id}", headers=JSON)
        assert detail.status_code == 200
        seen["GET /incidents/N"] = detail.text
        seen["GET /incidents/N (text)"] = client.get(f"/incidents/{incident_id}", headers={"Accept": "text/plain"}).text
        title = detail.json()["title"]
        assert title.startswith("GatedRepoError: ") and "hf_***" in title and not _leaks(title), title
        for query in ("GatedRepoError", "401 Client Error", "redis"):
            found = client.get("/incidents", params={"q": query}, headers=JSON)
            assert found.status_code == 200
            seen[f"GET /incidents?q={query}"] = found.text
        assert any(i["id"] == incident_id for i in client.get("/incidents", params={"q": "GatedRepoError"},
                                                              headers=JSON).json()["items"])
        stored = client.get(f"/occurrences/{occurrence_id}/log")
        assert stored.status_code == 200 and "Traceback (most recent call last)" in stored.text
        seen["GET /occurrences/N/log"] = stored.text
        for page in (f"/ui/incidents/{incident_id}", "/ui/incidents", "/ui/incidents?q=GatedRepoError", "/"):
            html = client.get(page, headers={"Accept": "text/html"})
            assert html.status_code == 200, page
            seen[page] = html.text
        form = client.post("/ui/upload", files={"log": ("vllm.log", log.encode(), "text/plain")},
                           data={**fields, "mode": "analyze"}, headers={"Accept": "text/html"})
        assert form.status_code == 200, form.text[:500]
        seen["POST /ui/upload (analyze)"] = form.text
    seen["database"] = _database_text(db)

    assert "--api-key ***" in seen["GET /occurrences/N/log"]  # redacted, not dropped
    assert "meta-llama/Llama-3.1-8B-Instruct" in seen["GET /incidents/N"]
    leaks = {where: [s[:12] + "..." for s in _leaks(text)] for where, text in seen.items()}
    assert not any(leaks.values()), {where: found for where, found in leaks.items() if found}


def test_the_command_and_every_field_are_stored_redacted(db):
    fields = {name: value for name, (value, _) in FIELD_SECRETS.items()}
    with api_client(db) as client:
        answer = _post(client, "/incidents", vllm_crash_log(), fields).json()
    database = _database_text(db)
    for name, (_, secrets) in FIELD_SECRETS.items():
        for secret in secrets:
            assert secret not in database, name
    command = FIELD_SECRETS["command"][0]
    assert ("env HF_TOKEN=*** WANDB_API_KEY=*** vllm serve meta-llama/Llama-3.1-8B-Instruct --api-key *** "
            "--hf-token *** --port 8000") in database, command
    assert answer["analysis"]["context"]["gpu"]["name"] == "NVIDIA H100 80GB HBM3 glpat-***"


def test_non_secrets_stay_in_the_stored_log_and_the_analysis(db):
    log = non_secret_log()
    with api_client(db) as client:
        created = _post(client, "/incidents", log, {"command": "vllm serve meta-llama/Llama-3.1-8B-Instruct "
                                                    "--tokenizer-mode auto --max-num-batched-tokens 8192"})
        assert created.status_code == 201, created.text
        answer = created.json()
        stored = client.get(f"/occurrences/{answer['occurrence']['id']}/log").text
        detail = client.get(f"/incidents/{answer['incident']['id']}", headers=JSON).json()
    assert stored == log
    assert answer["analysis"]["redactions"] == 0
    message = answer["analysis"]["root_cause"]["message"]
    assert "cudaErrorIllegalAddress, error code 700" in message and "0x7f3a2b1c4d50" in message
    assert answer["analysis"]["context"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "***" not in json.dumps(answer) and "***" not in json.dumps(detail)
    for text in NOT_SECRETS:
        assert text in log
    database = _database_text(db)
    assert "--tokenizer-mode auto --max-num-batched-tokens 8192" in database
