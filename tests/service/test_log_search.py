"""Search over the stored log text, the list's views and tag filter, and the occurrence
breakdown, through the API, on SQLite (FTS5 trigram) and Postgres (tsvector + GIN)."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from kb.db import logsearch, migrate
from kb.db.logcodec import compress_log
from kb.db.session import Database
from kb.services.seeding import seed_database
from tests.service.helpers import SAMPLE_SEEDS, api_client, upload
from tests.service.logs import HEADS, NCCL, WRAPPER_ONLY, vllm_log, with_lines

SYMBOL = "_ZN3c104cuda20CUDACachingAllocator9allocatorE"
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
FLASH = "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"
@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def search(client, q: str, **params) -> dict:
    response = client.get("/incidents", params={"q": q, **params})
    assert response.status_code == 200, response.text
    return response.json()


def test_paths_file_names_and_mangled_symbols_printed_in_a_log_are_found(client):
    native = with_lines(
        vllm_log(**NCCL),
        f"terminate called after throwing an instance of 'c10::Error' in {SYMBOL}",
        f"frame #3: {SYMBOL} + 0x1c (0x7f3a in {LIBCUDA})",
        f"ImportError: {FLASH}: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs")
    crash = upload(client, native).json()["incident"]["id"]
    other = upload(client, vllm_log(**HEADS)).json()["incident"]["id"]
    assert crash != other
    for q in (SYMBOL, LIBCUDA, "libcuda.so.1", FLASH, "CUDACachingAllocator",
              "x86_64-linux-gnu/libcuda", "cudacachingallocator9allocatore"):
        found = search(client, q)
        assert [i["id"] for i in found["items"]] == [crash], q
        match = found["items"][0]["log_match"]
        assert q.casefold() in match["line"].casefold(), (q, match)
        assert match["log_url"].endswith(f"/occurrences/{match['occurrence_id']}/log")
    # two terms: both must be in the log, anywhere
    assert [i["id"] for i in search(client, f"{FLASH} undefined")["items"]] == [crash]
    assert search(client, f"{FLASH} nowhere-in-any-log")["items"] == []


def test_results_are_ranked_text_matches_first_then_the_best_log_match(client):
    # the log that says it more often first: newer would otherwise break the tie
    often = upload(client, with_lines(vllm_log(**HEADS), *["zebrafish watchdog fired"] * 6)).json()
    once = upload(client, with_lines(vllm_log(**NCCL), "warning: zebrafish watchdog")).json()
    titled = upload(client, vllm_log(exception="ZebrafishError", message="zebrafish stalled")).json()
    ids = [i["id"] for i in search(client, "zebrafish")["items"]]
    assert ids == [titled["incident"]["id"], often["incident"]["id"], once["incident"]["id"]]
    # an explicit sort still applies to the same hits
    by_id = [i["id"] for i in search(client, "zebrafish", sort="id")["items"]]
    assert by_id == sorted(ids)
    assert search(client, "zebrafish", per_page=1)["total"] == 3


def test_wildcards_in_the_query_are_taken_literally(client):
    percent = upload(client, with_lines(vllm_log(**NCCL), "KV cache usage 100% full")).json()
    upload(client, with_lines(vllm_log(**HEADS), "processed 1000 items in cuda0x kernels"))
    assert [i["id"] for i in search(client, "100%")["items"]] == [percent["incident"]["id"]]
    assert search(client, "cuda_x")["items"] == []  # `_` is not "any character"
    assert search(client, "1%0")["items"] == []
    assert search(client, '"100%" full')["items"] == []  # quotes are characters too
    assert search(client, "%%%")["items"] == []


def test_title_search_still_finds_incidents_and_short_terms_only_search_titles(client):
    nccl = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    heads = upload(client, vllm_log(**HEADS)).json()["incident"]["id"]
    assert [i["id"] for i in search(client, "DistBackendError")["items"]] == [nccl]
    assert search(client, "DistBackendError")["items"][0]["log_match"] is not None
    # "TP" is too short for the log index: only titles, signatures and notes are searched
    assert {i["id"] for i in search(client, "ValueError")["items"]} == {heads}


def _seed(db) -> None:
    report = seed_database(db, SAMPLE_SEEDS)
    assert report.errors == [] and report.added > 0


def test_views_seen_here_seeded_and_needs_triage(db):
    _seed(db)
    with api_client(db) as client:
        seeded_total = client.get("/incidents", params={"view": "seeded"}).json()["total"]
        assert seeded_total > 0
        known = upload(client, vllm_log(**NCCL)).json()
        wrapper = upload(client, WRAPPER_ONLY).json()
        assert wrapper["analysis"]["verdict"] == "not_captured"

        def ids(view: str) -> set[int]:
            response = client.get("/incidents", params={"view": view, "per_page": 200})
            assert response.status_code == 200, response.text
            items = response.json()["items"]
            assert response.json()["filters"]["view"] == view
            return {i["id"] for i in items}

        seen = ids("seen_here")
        assert seen == {known["incident"]["id"], wrapper["incident"]["id"]}
        seeded = ids("seeded")
        assert not seeded & seen and len(seeded) == seeded_total - (
            1 if known["match"]["status"] == "known" and known["incident"]["slug"] else 0)
        assert all(i["seeded"] and i["occurrences"] == 0 for i in client.get(
            "/incidents", params={"view": "seeded", "per_page": 200}).json()["items"])
        assert ids("needs_triage") == {wrapper["incident"]["id"]}
        bad = client.get("/incidents", params={"view": "everything"})
        assert bad.status_code == 400 and "view must be one of" in bad.json()["detail"]


def test_tag_filter_and_breakdown_by_version_gpu_and_model(client):
    first = upload(client, vllm_log(**NCCL), gpu="NVIDIA H100 80GB HBM3", engine_version="0.11.0").json()
    upload(client, vllm_log(**NCCL), gpu="NVIDIA H100 80GB HBM3", engine_version="0.10.1")
    upload(client, vllm_log(**NCCL), gpu="NVIDIA A100-SXM4-80GB", engine_version="0.11.0",
           model="Qwen/Qwen3-8B")
    other = upload(client, vllm_log(**HEADS)).json()
    incident_id = first["incident"]["id"]
    patched = client.patch(f"/incidents/{incident_id}", json={"tags": ["nccl", "Multi-Node"]})
    assert patched.status_code == 200, patched.text
    for tag in ("nccl", "multi-node", "MULTI-NODE"):
        items = client.get("/incidents", params={"tag": tag}).json()["items"]
        assert [i["id"] for i in items] == [incident_id], tag
    assert client.get("/incidents", params={"tag": "nope"}).json()["items"] == []
    assert other["incident"]["id"] != incident_id

    breakdown = client.get(f"/incidents/{incident_id}").json()["breakdown"]
    assert breakdown["engine_versions"] == [{"value": "0.11.0", "count": 2},
                                            {"value": "0.10.1", "count": 1}]
    assert breakdown["gpus"] == [{"value": "NVIDIA H100 80GB HBM3", "count": 2},
                                 {"value": "NVIDIA A100-SXM4-80GB", "count": 1}]
    assert breakdown["models"][0] == {"value": "moonshotai/Kimi-K2-Instruct", "count": 2}
    assert {"value": "Qwen/Qwen3-8B", "count": 1} in breakdown["models"]


def test_a_merge_takes_the_log_hits_along(client):
    a = upload(client, with_lines(vllm_log(**NCCL), f"loaded {FLASH}")).json()["incident"]["id"]
    b = upload(client, vllm_log(**HEADS)).json()["incident"]["id"]
    assert client.post(f"/incidents/{a}/merge", json={"into": b}).status_code == 200
    assert [i["id"] for i in search(client, FLASH)["items"]] == [b]


def test_a_large_log_indexes_its_head_events_and_tail_only():
    """The excerpt of a large log: the lines near the analysis' events are in, a line
    deep in the noise is out, and the whole stays within its bound."""
    noise = [f"INFO step {n} loss 0.{n % 97:02d} throughput 1234 tokens/s padding " + "x" * 40
             for n in range(40_000)]
    noise[20_000] = "INFO buried_marker_in_the_middle"
    noise[39_990] = "ERROR last_words_marker"
    lines = noise[:30_000] + ["Traceback (most recent call last):",
                              '  File "/x/vllm/worker.py", line 3, in run',
                              f"    lib = load('{LIBCUDA}')",
                              "RuntimeError: boom"] + noise[30_000:]
    log = ("\n".join(lines) + "\n").encode()
    analysis = {"lines": len(lines), "root_cause": {"line_number": 30_004, "frames": [{}]},
                "symptoms": []}
    text = logsearch.search_text(log, analysis)
    assert len(text.encode()) <= logsearch.MAX_EXCERPT_BYTES
    assert LIBCUDA in text and "RuntimeError: boom" in text
    assert "last_words_marker" in text and noise[0] in text
    assert "buried_marker_in_the_middle" not in text


def test_the_upgrade_indexes_the_logs_stored_before_search_existed(fresh_db_url):
    """0007 cuts the excerpts of stored logs, 0010 makes Postgres' search vectors of them."""
    db = Database(fresh_db_url, pool_size=1)
    try:
        migrate.upgrade(db.engine, "0006")
        with db.engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO incidents (id, title, tags, links, model_archs, gpu_families, "
                "engine_limitation, recommended_path, seeded, occurrence_count, created_at, "
                "updated_at) VALUES (1, 'old crash', '[]', '[]', '[]', '[]', false, "
                "'investigate', false, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
            conn.execute(sa.text(
                "INSERT INTO occurrences (incident_id, match_status, analysis, log_compressed, "
                "log_bytes, log_lines, redactions, created_at) VALUES (1, 'new', :analysis, :log, "
                "10, 2, 0, CURRENT_TIMESTAMP)"),
                {"analysis": json.dumps({"lines": 2}),
                 "log": compress_log(f"start\nOSError: {LIBCUDA}: cannot open\n".encode())})
        migrate.upgrade(db.engine)
        with db.read() as session:
            from kb.db.repositories import Repository

            matches = Repository(session).log_matches(["libcuda.so.1"], [1])
        assert matches[1].line == f"OSError: {LIBCUDA}: cannot open"
        migrate.downgrade(db.engine, "0006")
        columns = {c["name"] for c in sa.inspect(db.engine).get_columns("occurrences")}
        assert "search_text" not in columns
        assert not set(sa.inspect(db.engine).get_table_names()) & logsearch.SQLITE_FTS_TABLES
    finally:
        migrate.downgrade(db.engine, "base")
        db.dispose()


def test_postgres_searches_through_the_gin_index(db):
    """The query's document is the index's expression, so the planner can use it."""
    if db.dialect != "postgresql":
        pytest.skip("the GIN index is Postgres's; SQLite's MATCH always uses FTS5")
    from sqlalchemy.dialects import postgresql

    statement = logsearch.ranked_occurrences("postgresql", ["libcuda.so.1", SYMBOL])
    sql = str(statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    with db.engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(row[0] for row in conn.execute(sa.text("EXPLAIN " + sql)))
    assert logsearch.PG_INDEX in plan, plan


@pytest.mark.parametrize("q", ["abc\x00def", "x" * 5000, '"""', "*", "NEAR(abc)", "abc OR def",
                               "\\\\\\", "é€😀 ünïcode", "a b c d e f g h i j k l"])
def test_any_query_text_is_an_answer_or_a_400(client, q):
    upload(client, vllm_log(**NCCL))
    response = client.get("/incidents", params={"q": q})
    if "\x00" in q:
        assert response.status_code == 400 and "NUL" in response.json()["detail"]
    else:
        assert response.status_code == 200, response.text
        assert response.json()["total"] == 0


def test_a_repeat_of_a_known_crash_is_indexed_too(client):
    """On Postgres a known crash is stored by one statement (kb.db.known_upload): its
    log is searchable like any other upload's."""
    first = upload(client, vllm_log(**NCCL)).json()
    again = upload(client, with_lines(vllm_log(**NCCL), f"second run loaded {FLASH}")).json()
    assert again["match"]["status"] == "known"
    assert again["incident"]["id"] == first["incident"]["id"]
    item = search(client, FLASH)["items"][0]
    assert item["id"] == first["incident"]["id"]
    assert item["log_match"]["occurrence_id"] == again["occurrence"]["id"]
    assert item["log_match"]["line"].endswith(f"second run loaded {FLASH}")


def test_the_text_report_shows_the_matching_line(client):
    from kb import textreport

    upload(client, with_lines(vllm_log(**NCCL), f"frame #3: {SYMBOL}"))
    report = textreport.list_report(search(client, SYMBOL))
    assert f"log #1: frame #3: {SYMBOL}" in report


@pytest.mark.parametrize("step", [997, 65536, 1 << 20])
@pytest.mark.parametrize("trailing_newline", [True, False])
def test_the_excerpt_of_a_streamed_log_is_the_excerpt_of_the_whole(step, trailing_newline):
    """A streamed upload is never held whole: its excerpt, taken as the stored log
    decompresses, is the one the whole log gives, wherever the pieces are cut."""
    from kb.core.analyze import analyze
    from kb.db.logsearch import search_text, search_text_of_stream

    lines = [f"INFO 12-03 10:00:{n % 60:02d} worker.py:{n}] step {n} " + "x" * (n * 37 % 180) for n in range(30000)]
    lines[29990] = "é" * 50_000 + " a line far longer than the excerpt keeps"
    lines[21000:21000] = ["Traceback (most recent call last):", '  File "/opt/x/model.py", line 3, in load',
                          "ImportError: /usr/lib/x86_64-linux-gnu/libcuda.so.1: cannot open shared object file"]
    log = ("\n".join(lines) + ("\n" if trailing_newline else "")).encode()
    analysis = analyze(log).to_dict()
    pieces = [log[i:i + step] for i in range(0, len(log), step)]
    whole = search_text(log, analysis)
    assert "libcuda.so.1" in whole and len(whole) < len(log)
    assert search_text_of_stream(pieces, len(log), analysis) == whole
