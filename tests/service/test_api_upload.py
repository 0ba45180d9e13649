"""POST /incidents and POST /analyze through Litestar's test client, on SQLite and
Postgres: the answer's contract, known vs new, overrides, bad input and auth."""

from __future__ import annotations

import gzip

import pytest

from tests.service.helpers import BASE_URL, api_client, upload
from tests.service.logs import HEADS, NCCL, vllm_log


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def test_first_upload_creates_an_incident_and_the_second_matches_it(client):
    first = upload(client, vllm_log())
    assert first.status_code == 201, first.text
    body = first.json()
    assert set(body) >= {"incident", "occurrence", "analysis", "match", "similar", "fixes",
                         "recommendation"}
    incident = body["incident"]
    assert incident["occurrences"] == 1
    assert incident["url"].endswith(f"/incidents/{incident['id']}")
    assert incident["first_seen"] and incident["last_seen"]
    assert body["match"]["status"] == "new"
    assert body["analysis"]["fingerprint"]["hash"]
    assert body["recommendation"]["path"] == "investigate"

    second = upload(client, vllm_log(seed=7))  # same crash, different noise
    assert second.status_code == 200, second.text
    again = second.json()
    assert again["match"]["status"] == "known"
    assert again["match"]["incident_id"] == incident["id"]
    assert again["incident"]["id"] == incident["id"]
    assert again["incident"]["occurrences"] == 2
    assert again["occurrence"]["id"] != body["occurrence"]["id"]
    assert again["match"]["explanation"]


def test_a_different_crash_is_a_new_incident(client):
    a = upload(client, vllm_log()).json()
    b = upload(client, vllm_log(**NCCL))
    assert b.status_code == 201
    assert b.json()["incident"]["id"] != a["incident"]["id"]


def test_raw_text_and_gzip_bodies(client):
    log = vllm_log(**HEADS)
    raw = client.post("/incidents", content=log.encode(), headers={"Content-Type": "text/plain"})
    assert raw.status_code == 201, raw.text
    gz = client.post("/incidents", content=gzip.compress(log.encode()),
                     headers={"Content-Type": "application/gzip"})
    assert gz.status_code == 200 and gz.json()["match"]["status"] == "known"
    encoded = client.post("/incidents", content=gzip.compress(log.encode()),
                          headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    assert encoded.status_code == 200
    # curl --data-binary @file sends application/x-www-form-urlencoded
    curl = client.post("/incidents", content=log.encode(),
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert curl.status_code == 200
    assert curl.json()["incident"]["occurrences"] == 4


def test_gzip_file_in_multipart(client):
    log = gzip.compress(vllm_log().encode())
    response = client.post("/incidents", files={"log": ("vllm.log.gz", log, "application/gzip")})
    assert response.status_code == 201
    assert response.json()["analysis"]["fingerprint"]["exception"]


def test_form_fields_override_the_log(client, db):
    response = upload(client, vllm_log(), engine_version="0.12.1", model_arch="kimi_k2",
                      gpu="NVIDIA B200", gpu_count=8, tp=8, reporter="alice", host="gpu-node-3",
                      command="vllm serve moonshotai/Kimi-K2.5", exit_code=1)
    assert response.status_code == 201, response.text
    ctx = response.json()["analysis"]["context"]
    assert ctx["engine_version"] == "0.12.1"
    assert ctx["model_arch"] == "kimi_k2"
    assert ctx["gpu"] == {"name": "NVIDIA B200", "count": 8}
    assert ctx["parallel"]["tp"] == 8
    detail = client.get(response.json()["incident"]["url"].removeprefix(BASE_URL)).json()
    occ = detail["occurrences"][0]
    assert (occ["reporter"], occ["host"], occ["exit_code"]) == ("alice", "gpu-node-3", 1)
    assert occ["engine_version"] == "0.12.1" and occ["command"].startswith("vllm serve")
    # query parameters work for raw bodies
    raw = client.post("/incidents?engine_version=0.9.2", content=vllm_log().encode(),
                      headers={"Content-Type": "text/plain"})
    assert raw.json()["analysis"]["context"]["engine_version"] == "0.9.2"


def test_bad_override_is_a_400(client):
    response = upload(client, vllm_log(), tp="eight")
    assert response.status_code == 400
    assert "tp" in response.json()["detail"]


def test_analyze_stores_nothing(client):
    response = client.post("/analyze", files={"log": ("vllm.log", vllm_log().encode())})
    assert response.status_code == 200
    body = response.json()
    assert body["incident"] is None and body["occurrence"] is None
    assert body["match"]["status"] == "new"
    assert client.get("/incidents").json()["total"] == 0
    upload(client, vllm_log())
    known = client.post("/analyze", content=vllm_log().encode(),
                        headers={"Content-Type": "text/plain"}).json()
    assert known["match"]["status"] == "known"
    assert known["incident"]["occurrences"] == 1


@pytest.mark.parametrize("case", ["empty-file", "whitespace", "missing-field", "wrong-field"])
def test_missing_or_empty_log_is_a_400(client, case):
    if case == "empty-file":
        response = client.post("/incidents", files={"log": ("vllm.log", b"")})
    elif case == "whitespace":
        response = client.post("/incidents", content=b"  \n\n ", headers={"Content-Type": "text/plain"})
    elif case == "missing-field":
        response = client.post("/incidents", files={"engine": (None, b"vllm")})
    else:
        response = client.post("/incidents", files={"file": ("vllm.log", b"hello")})
    assert response.status_code == 400, response.text
    assert response.json()["detail"]
    if case == "wrong-field":
        assert "'log'" in response.json()["detail"]


@pytest.mark.parametrize("data", [
    b"\x00\x01\x02\x03" * 1000,
    b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10,
    b"PK\x03\x04" + b"\x00" * 100,
    gzip.compress(b"\x00\xff" * 5000),
])
def test_binary_upload_is_a_422_with_a_reason(client, data):
    response = client.post("/incidents", files={"log": ("x.bin", data, "application/octet-stream")})
    assert response.status_code == 422, response.text
    assert "text" in response.json()["detail"]


def test_corrupt_gzip_is_a_422(client):
    response = client.post("/incidents", content=b"\x1f\x8b\x08\x00garbage-not-deflate" * 10,
                           headers={"Content-Type": "application/gzip"})
    assert response.status_code == 422


@pytest.mark.parametrize("content_type", ["application/json", "image/png", "application/pdf"])
def test_unsupported_media_type_is_a_415(client, content_type):
    response = client.post("/incidents", content=b'{"log": "x"}', headers={"Content-Type": content_type})
    assert response.status_code == 415
    assert "multipart" in response.json()["detail"]


def test_unsupported_content_encoding_is_a_415(client):
    response = client.post("/incidents", content=b"abc", headers={"Content-Type": "text/plain",
                                                                  "Content-Encoding": "br"})
    assert response.status_code == 415


def test_too_large_is_a_413(db):
    with api_client(db, max_upload_mb=1) as client:
        big = ("x" * 1023 + "\n").encode() * 1100  # 1.07 MiB
        for response in (
            client.post("/incidents", files={"log": ("big.log", big)}),
            client.post("/incidents", content=big, headers={"Content-Type": "text/plain"}),
            client.post("/analyze", content=big, headers={"Content-Type": "text/plain"}),
        ):
            assert response.status_code == 413, response.text
            assert "MiB" in response.json()["detail"]
        bomb = gzip.compress(b"A" * (3 * 1024 * 1024))  # small on the wire, 3 MiB inflated
        response = client.post("/incidents", content=bomb, headers={"Content-Type": "application/gzip"})
        assert response.status_code == 413
        assert client.get("/incidents").json()["total"] == 0


def test_writes_need_a_token_when_tokens_are_set(db):
    with api_client(db, api_tokens=("s3cret", "other")) as client:
        assert upload(client, vllm_log()).status_code == 401
        bad = client.post("/incidents", files={"log": ("v.log", vllm_log().encode())},
                          headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
        assert bad.headers["www-authenticate"].startswith("Bearer")
        ok = client.post("/incidents", files={"log": ("v.log", vllm_log().encode())},
                         headers={"Authorization": "Bearer other"})
        assert ok.status_code == 201
        incident_id = ok.json()["incident"]["id"]
        assert client.patch(f"/incidents/{incident_id}", json={"title": "x"}).status_code == 401
        assert client.post(f"/incidents/{incident_id}/fixes",
                           json={"title": "t", "kind": "config", "change": {"flags": ["--enforce-eager"]}}).status_code == 401
        # reads and the side-effect-free analysis stay open
        assert client.get("/incidents").status_code == 200
        assert client.get(f"/incidents/{incident_id}").status_code == 200
        assert client.post("/analyze", content=vllm_log().encode(),
                           headers={"Content-Type": "text/plain"}).status_code == 200


def test_stored_log_is_the_redacted_text(client):
    log = vllm_log() + "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789 vllm serve x\n"
    body = upload(client, log).json()
    detail = client.get(f"/incidents/{body['incident']['id']}").json()
    log_url = detail["occurrences"][0]["log_url"].removeprefix(BASE_URL)
    stored = client.get(log_url)
    assert stored.status_code == 200
    assert "Traceback (most recent call last)" in stored.text
    assert "hf_abcdefghijklmnopqrstuvwxyz0123456789" not in stored.text


def test_openapi_schema_and_health(client):
    schema = client.get("/schema/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in ("/incidents", "/analyze", "/incidents/{incident_id}", "/incidents/{incident_id}/fixes",
                 "/fixes/{fix_id}/outcomes", "/incidents/{incident_id}/merge", "/healthz"):
        assert path in paths, path
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    assert health.json()["schema_revision"]


def test_openapi_schema_states_the_error_answers_and_the_allowed_values(client):
    """Other tools code against the schema: every route lists the errors it can answer
    (with the one error body), and the closed sets (fix kinds, sorts, phases, paths,
    integer overrides) are enums and ranges there, not only prose."""
    schema = client.get("/schema/openapi.json").json()
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    expected = {("post", "/incidents"): {"400", "401", "403", "413", "415", "422", "503"},
                ("post", "/analyze"): {"400", "403", "413", "415", "422", "503"},
                ("get", "/incidents/{incident_id}"): {"400", "404", "503"},
                ("post", "/incidents/{incident_id}/merge"): {"400", "401", "403", "404", "409", "503"},
                ("post", "/fixes/{fix_id}/outcomes"): {"400", "401", "403", "404", "503"},
                ("get", "/export"): {"400", "401", "403", "404", "503"}}
    for (method, path), codes in expected.items():
        responses = schema["paths"][path][method]["responses"]
        assert {code for code in responses if code >= "400"} == codes, (method, path)
        for code in codes:
            assert responses[code]["content"]["application/json"]["schema"] == error_ref
    for operation in (op for ops in schema["paths"].values() for op in ops.values()):
        assert "503" in operation["responses"], operation["summary"]

    components = schema["components"]["schemas"]
    assert set(components["NewFix"]["properties"]["kind"]["enum"]) == {
        "config", "patch", "upgrade", "downgrade", "workaround", "switch_engine"}
    params = {p["name"]: p["schema"] for p in schema["paths"]["/incidents"]["get"]["parameters"]}
    assert params["sort"]["enum"][0] == "last_seen" and "kv_cache_profiling" in params["phase"]["enum"]
    assert params["path"]["enum"] == ["patch", "switch_engine", "investigate"]
    form = schema["paths"]["/incidents"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["properties"]["tp"] == {"type": "integer", "minimum": 0, "maximum": 1_000_000}
    assert form["properties"]["failure"]["enum"] == ["exit", "hang", "not_ready"]


def test_numbers_past_the_databases_range_are_a_400_not_a_storage_error(client):
    for url in ("/incidents/9223372036854775808", "/occurrences/184455909418208002048/log",
                "/incidents?page=375889238383551808"):
        response = client.get(url)
        assert response.status_code == 400, url
    assert "page must be between" in client.get("/ui/incidents?page=375889238383551808").text
    assert client.get("/incidents/9223372036854775807").status_code == 404


def test_odd_but_valid_input_is_stored_not_rejected(client):
    """Values longer than their columns, stray NULs deep in a log: still a 201."""
    log = vllm_log() + "x" * 70_000 + "\x00\x00 stray NULs\n"
    response = upload(client, log, engine_version="0." + "1" * 200, model="m" * 290,
                      gpu="G" * 250, exit_code=-9)
    assert response.status_code == 201, response.text
    assert upload(client, vllm_log(), tp=10**12).status_code == 400
    assert upload(client, vllm_log(), gpu_count=-1).status_code == 400


def test_the_service_stores_the_same_analysis_dict_as_kb_analyze_json():
    """The upload path converts the analysis with msgspec (fast); `kb analyze --json`
    with dataclasses.asdict: for every fixture log the two agree exactly."""
    from pathlib import Path

    from kb.core.analyze import analyze
    from kb.services.ingest import analysis_dict

    logs = sorted((Path(__file__).parents[1] / "core" / "fixtures").glob("*.log"))
    assert len(logs) >= 30
    for path in logs:
        analysis = analyze(path.read_bytes())
        assert analysis_dict(analysis) == analysis.to_dict(), path.name


UNPARSED = "INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1\nINFO all good so far\n"
WRAPPER_ONLY = (
    "INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1\n"
    "(EngineCore_0 pid=274) ERROR 05-01 12:03:43 [core.py:700] EngineCore failed to start.\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 759, in wait_for_engine_startup\n'
    '    raise RuntimeError("Engine core initialization failed. "\n'
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")


@pytest.mark.parametrize("log", [UNPARSED, WRAPPER_ONLY], ids=["no-error", "wrappers-only"])
def test_a_log_that_does_not_show_its_cause_never_groups_with_another(client, log):
    """No error, or only wrappers: nothing identifies the crash, so each upload is its own
    incident, never 'known' (a fix added to one must not be advised for the next)."""
    first, second = upload(client, log).json(), upload(client, log).json()
    assert first["match"]["status"] == second["match"]["status"] == "new"
    assert first["incident"]["id"] != second["incident"]["id"]
    answer = client.post("/analyze", files={"log": ("vllm.log", log.encode(), "text/plain")}).json()
    assert answer["match"]["status"] == "new" and answer["similar"] == []


def test_another_engines_crash_is_never_known_and_never_gets_its_flags(client):
    """The same error text from SGLang lands beside the vLLM incident as similar at most,
    as a new incident, and the vLLM incident's flags are not its recommendation."""
    first = upload(client, vllm_log()).json()
    incident_id = first["incident"]["id"]
    fix = client.post(f"/incidents/{incident_id}/fixes", json={
        "title": "Raise --gpu-memory-utilization", "kind": "config", "description": "more KV cache",
        "change": {"flags": ["--gpu-memory-utilization 0.95"]}})
    assert fix.status_code == 201, fix.text
    other = upload(client, vllm_log(), engine="sglang").json()
    assert other["match"]["status"] != "known"
    assert other["incident"]["id"] != incident_id
    assert other["recommendation"]["path"] == "investigate"
    assert other["recommendation"]["fix_id"] != fix.json()["id"]
    same_engine = upload(client, vllm_log(seed=3)).json()
    assert same_engine["match"]["status"] == "known" and same_engine["incident"]["id"] == incident_id
    assert same_engine["recommendation"]["fix_id"] == fix.json()["id"]


SEGFAULT_IN_NCCL = """\
(RayWorkerWrapper pid=5120, ip=10.40.1.22) INFO 05-06 14:18:50 [pynccl.py:69] vLLM is using nccl==2.21.5
(RayWorkerWrapper pid=5120, ip=10.40.1.22) *** SIGSEGV received at time=1746541135 on cpu 57 ***
(RayWorkerWrapper pid=5120, ip=10.40.1.22) PC: @     0x7f3a2b1c4d10  (unknown)  ncclCommInitRank()
(RayWorkerWrapper pid=5120, ip=10.40.1.22)     @     0x7f3e11a42520       3792  (unknown)
(raylet, ip=10.40.1.22) A worker died or was killed while executing a task by an unexpected system error.
"""
SEGFAULT_IN_TOKENIZER = """\
INFO 07-01 09:12:03 [api_server.py:1839] vLLM API server version 0.9.2
Fatal Python error: Segmentation fault

Current thread 0x00007f0c1b7fe640 (most recent call first):
  File "/usr/lib/python3.12/site-packages/tokenizers/implementations/base_tokenizer.py", line 280 in encode_batch
  File "/usr/lib/python3.12/site-packages/vllm/transformers_utils/tokenizer.py", line 91 in encode

"""
SEGFAULT_NOWHERE = "INFO 07-01 09:12:03 [api_server.py:1839] vLLM API server version 0.9.2\nSegmentation fault (core dumped)\n"


def test_a_segfault_is_identified_by_where_it_crashed(client):
    """A crash signal names no cause by itself: its identity is the crash site (native
    or Python frames). Two crashes at one site group; at different sites, or with no
    site in the log, they never do (at most similar)."""
    nccl = upload(client, SEGFAULT_IN_NCCL).json()
    assert "ncclCommInitRank" in nccl["analysis"]["fingerprint"]["signature"]
    again = upload(client, SEGFAULT_IN_NCCL.replace("5120", "7311")).json()
    assert again["match"]["status"] == "known" and again["incident"]["id"] == nccl["incident"]["id"]
    tokenizer = upload(client, SEGFAULT_IN_TOKENIZER).json()
    assert tokenizer["analysis"]["fingerprint"]["frames"][-1].endswith(":encode_batch")
    assert tokenizer["match"]["status"] != "known" and tokenizer["created"]
    nowhere = [upload(client, SEGFAULT_NOWHERE).json() for _ in range(2)]
    assert nowhere[0]["analysis"]["fingerprint"]["weak"] is True
    assert [n["match"]["status"] for n in nowhere] != ["known"] * 2
    assert all(n["created"] for n in nowhere)
    assert len({n["incident"]["id"] for n in nowhere} | {nccl["incident"]["id"], tokenizer["incident"]["id"]}) == 4


KERNEL_OVER_LIMIT = ("INFO 03-02 10:00:00 [core.py:70] Initializing a V1 LLM engine (v0.11.0)\n"
                     "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: {n}, "
                     "Hardware limit: 65536. Reducing block sizes or `num_stages` may help.\n")


def test_a_kernel_fault_without_where_it_surfaced_never_routes_two_uploads_together(client):
    """A Triton kernel over its shared memory, or an illegal memory access, names no
    kernel: two one-line excerpts (two kernels, for all they show) never share an incident,
    as two crash signals without a site never do."""
    first = upload(client, KERNEL_OVER_LIMIT.format(n=98304)).json()
    assert first["analysis"]["fingerprint"]["weak"] is True
    second = upload(client, KERNEL_OVER_LIMIT.format(n=131072)).json()
    assert second["match"]["status"] != "known" and second["created"]
    fault = "INFO 03-02 10:00:00 [core.py:70] ready\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    faults = [upload(client, fault).json() for _ in range(2)]
    assert faults[0]["analysis"]["fingerprint"]["weak"] is True
    assert faults[1]["match"]["status"] != "known" and faults[1]["created"]


NOTEBOOK_CUT = """\
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[{cell}], line 1
----> 1 {code}
"""


def test_a_crash_that_shows_only_its_type_is_never_known(client):
    """A notebook's traceback cut after its header names a type and nothing else: no
    message, no frame. Two such uploads (two unrelated crashes, for all the log shows)
    never share an incident."""
    first = upload(client, NOTEBOOK_CUT.format(cell=3, code="llm = LLM(model=path, tensor_parallel_size=2)")).json()
    assert first["analysis"]["fingerprint"]["weak"] is True
    second = upload(client, NOTEBOOK_CUT.format(cell=9, code="out = model.generate(**inputs)")).json()
    assert second["match"]["status"] != "known" and second["created"]
    assert first["incident"]["id"] != second["incident"]["id"]


# A scheduler's traceback cut after its first frames: the frames every crash of that
# process starts with (SGLang's scheduler builds its worker), then the excerpt ends.
SCHEDULER_CUT = """\
[2025-06-23 15:37:01 TP1] {before}
[2025-06-23 15:37:01 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2546, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, pp_rank, dp_rank)
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 312, in __init__
    self.tp_worker = TpWorkerClass(
"""


def test_tracebacks_cut_before_their_error_never_share_an_incident_by_frames(client):
    """Two tracebacks cut before their exception line show where each process was, not
    what failed: the same first frames (a process's entry point) are no identity, so the
    two are never routed to one incident."""
    first = upload(client, SCHEDULER_CUT.format(before="Load weight begin. avail mem=70.12 GB")).json()
    assert first["analysis"]["fingerprint"]["weak"] is True
    second = upload(client, SCHEDULER_CUT.format(before="Init torch distributed begin.")).json()
    assert second["match"]["status"] != "known" and second["created"]
    assert first["incident"]["id"] != second["incident"]["id"]


PLACEMENT_GROUP = """\
INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1
ERROR 05-01 12:00:04 [engine.py:9] ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.
"""
PIPELINE_STEP = """\
[05/01/25 12:00:00] INFO     ['distilabel.pipeline'] Ray cluster started with 4 GPUs
[05/01/25 12:00:09] ERROR    ['distilabel.pipeline'] Failed to load step 'judge_0': Step load failed: The number of required GPUs exceeds the total number of available GPUs in the placement group.
"""


def test_an_error_quoted_after_clauses_of_context_is_found_by_its_own_words(client):
    """A pipeline's log line 'Failed to load step x: Step load failed: <the error>' is
    recalled by the error it ends with, and scored known to that error's incident."""
    first = upload(client, PLACEMENT_GROUP).json()
    answer = client.post("/analyze", files={"log": ("run.log", PIPELINE_STEP.encode(), "text/plain")}).json()
    assert answer["analysis"]["root_cause"]["message"].startswith("['distilabel.pipeline'] Failed to load step")
    assert answer["match"]["status"] == "known", answer["match"]
    assert answer["match"]["incident_id"] == first["incident"]["id"]
