"""The HTML pages through Litestar's test client, on SQLite and Postgres: they render the
service's structs, escape log text, run the curation forms (Post/Redirect/Get) and
honour KB_API_TOKENS."""

from __future__ import annotations

import re

import pytest

from kb.web.pages import sparkline
from tests.service.helpers import BASE_URL, api_client, upload
from tests.service.logs import HEADS, NCCL, vllm_log

SCRIPT = '<script>alert("pwned")</script>'


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def _html(response) -> str:
    assert response.headers["content-type"].startswith("text/html"), response.headers
    return response.text


def test_home_redirects_to_the_list_and_empty_list_says_so(client):
    home = client.get("/", follow_redirects=False)
    assert home.status_code == 302 and home.headers["location"] == "/ui/incidents"
    page = client.get("/ui/incidents")
    assert page.status_code == 200
    assert "No incidents" in _html(page)
    assert client.get("/ui/static/kb.css").status_code == 200


def test_list_rows_search_filters_and_sort(client):
    a = upload(client, vllm_log(), model_arch="kimi_k2").json()
    b = upload(client, vllm_log(**NCCL), engine_version="0.10.1", gpu="NVIDIA A100-SXM4-80GB").json()
    upload(client, vllm_log(**NCCL, seed=3), engine_version="0.10.1", gpu="NVIDIA A100-SXM4-80GB")
    page = _html(client.get("/ui/incidents"))
    for result in (a, b):
        assert f'href="/ui/incidents/{result["incident"]["id"]}"' in page
    # row content: exception, versions seen, arch, GPUs, sparkline, badge
    assert "DistBackendError" in page and "0.10.1" in page and "kimi_k2" in page
    assert "nvidia a100-sxm4-80gb" in page.lower()
    assert page.count('<svg class="spark"') == 2
    assert "2 occurrences in the last 30 days" in page
    assert 'class="badge path-investigate"' in page

    found = _html(client.get("/ui/incidents", params={"q": "nccl"}))
    assert f'/ui/incidents/{b["incident"]["id"]}"' in found
    assert f'/ui/incidents/{a["incident"]["id"]}"' not in found
    assert _html(client.get("/ui/incidents", params={"model_arch": "kimi_k2"})).count('class="incident"') == 1
    assert _html(client.get("/ui/incidents", params={"gpu": "a100", "has_fix": "no",
                                                     "engine": "vllm"})).count('class="incident"') == 1
    assert "No incidents match" in _html(client.get("/ui/incidents", params={"has_fix": "yes"}))
    by_count = _html(client.get("/ui/incidents", params={"sort": "occurrences"}))
    assert by_count.index(f'/ui/incidents/{b["incident"]["id"]}"') < by_count.index(
        f'/ui/incidents/{a["incident"]["id"]}"')
    bad = client.get("/ui/incidents", params={"phase": "lunch"})
    assert bad.status_code == 400 and "phase must be one of" in _html(bad)


def test_detail_shows_root_cause_wrappers_context_and_occurrences(client):
    body = upload(client, vllm_log(**HEADS), reporter="alice").json()
    incident_id, occurrence_id = body["incident"]["id"], body["occurrence"]["id"]
    page = _html(client.get(f"/ui/incidents/{incident_id}"))
    exc_line = re.search(r'<mark class="exc">(.*?)</mark>', page, re.S)
    assert exc_line and "ValueError" in exc_line.group(1) and "attention heads" in exc_line.group(1)
    root = body["analysis"]["root_cause"]
    if root and root.get("process"):
        assert root["process"] in page
    assert "<details class=\"wrappers\">" in page or not body["analysis"]["symptoms"]
    assert f'/occurrences/{occurrence_id}/log"' in page
    assert "Time to crash" in page and "Crash phase" in page
    assert "alice" in page
    # the page renders the same struct GET /incidents/{id} returns
    api = client.get(f"/incidents/{incident_id}").json()
    assert "Recommendation" in page and api["recommendation"]["reason"] in page
    log = client.get(f"/occurrences/{occurrence_id}/log")
    assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
    missing = client.get("/ui/incidents/999999")
    assert missing.status_code == 404 and "does not exist" in _html(missing)


def test_log_text_is_always_escaped(client):
    log = vllm_log(exception="RuntimeError", message=f"bad token {SCRIPT} in prompt")
    body = upload(client, log).json()
    detail = _html(client.get(f"/ui/incidents/{body['incident']['id']}"))
    listing = _html(client.get("/ui/incidents"))
    answer = _html(client.post("/ui/upload", data={"text": log, "mode": "analyze"},
                               files={"log": ("", b"", "application/octet-stream")}))
    for page in (detail, listing, answer):
        assert SCRIPT not in page
        assert "<script" not in page.lower()
    assert "&lt;script&gt;" in detail and "&lt;script&gt;" in answer


def test_upload_page_paste_and_file_give_the_api_answer(client, db):
    form = _html(client.get("/ui/upload"))
    assert 'name="log" type="file"' in form and 'name="text"' in form
    stored = client.post("/ui/upload", data={"text": vllm_log(), "mode": "store", "reporter": "bob"},
                         files={"log": ("", b"", "application/octet-stream")})
    assert stored.status_code == 201
    page = _html(stored)
    assert "New crash" in page and 'id="incident-link"' in page
    again = client.post("/ui/upload", data={"mode": "store"},
                        files={"log": ("vllm.log", vllm_log(seed=5).encode(), "text/plain")})
    assert again.status_code == 200 and "Known crash" in _html(again)
    listing = client.get("/incidents").json()
    assert listing["total"] == 1 and listing["items"][0]["occurrences"] == 2

    analyzed = client.post("/ui/upload", data={"text": vllm_log(**NCCL), "mode": "analyze"})
    assert analyzed.status_code == 200 and "nothing was stored" in _html(analyzed)
    assert client.get("/incidents").json()["total"] == 1

    empty = client.post("/ui/upload", data={"text": "  ", "mode": "store"})
    assert empty.status_code == 400 and "paste the log" in _html(empty)
    binary = client.post("/ui/upload", data={"mode": "store"},
                         files={"log": ("core", b"\x7fELF\x02\x01\x01" + b"\x00" * 64, "application/octet-stream")})
    assert binary.status_code == 422 and "ELF" in _html(binary)


def test_curation_forms_post_redirect_get(client):
    a = upload(client, vllm_log()).json()["incident"]["id"]
    b = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]

    edited = client.post(f"/ui/incidents/{a}/edit", follow_redirects=False,
                         data={"title": "KV cache does not fit", "notes": "seen on <b>H100</b>",
                               "tags": "oom, kv-cache"})
    assert edited.status_code == 303 and edited.headers["location"].startswith(f"/ui/incidents/{a}")
    detail = client.get(f"/incidents/{a}").json()
    assert detail["title"] == "KV cache does not fit" and detail["tags"] == ["oom", "kv-cache"]
    assert "seen on &lt;b&gt;H100&lt;/b&gt;" in _html(client.get(f"/ui/incidents/{a}"))

    added = client.post(f"/ui/incidents/{a}/fixes", follow_redirects=False,
                        data={"title": "Lower gpu_memory_utilization", "kind": "config",
                              "description": "0.85 leaves room",
                              "change": "flags=--gpu-memory-utilization 0.85\nflags=--enforce-eager\nenv=VLLM_USE_V1=0",
                              "applies_engine": "vllm", "applies_model_arch": "qwen3, llama"})
    assert added.status_code == 303
    fix = client.get(f"/incidents/{a}").json()["fixes"][0]
    assert fix["change"] == {"flags": ["--gpu-memory-utilization 0.85", "--enforce-eager"],
                             "env": {"VLLM_USE_V1": "0"}}
    assert fix["applies_to"] == {"engine": "vllm", "model_archs": ["qwen3", "llama"]}
    assert f"#fix-{fix['id']}" in added.headers["location"]

    for worked in ("1", "1", "0"):
        r = client.post(f"/ui/fixes/{fix['id']}/outcomes", follow_redirects=False,
                        data={"worked": worked, "note": "tried", "engine_version": "0.11.0"})
        assert r.status_code == 303
    fix = client.get(f"/incidents/{a}").json()["fixes"][0]
    assert (fix["worked"], fix["failed"]) == (2, 1)
    page = _html(client.get(f"/ui/incidents/{a}"))
    assert "worked 2" in page and "failed 1" in page

    bad = client.post(f"/ui/incidents/{a}/fixes", data={"title": "", "kind": "config", "change": "flags=--enforce-eager"})
    assert bad.status_code == 400
    bad = client.post(f"/ui/incidents/{a}/fixes", data={"title": "x", "kind": "config", "change": "nonsense"})
    assert bad.status_code == 400 and "key=value" in _html(bad)
    assert client.post(f"/ui/fixes/{fix['id']}/outcomes", data={}).status_code == 400

    merged = client.post(f"/ui/incidents/{b}/merge", data={"into": str(a)}, follow_redirects=False)
    assert merged.status_code == 303 and merged.headers["location"].startswith(f"/ui/incidents/{a}")
    assert client.get(f"/incidents/{a}").json()["occurrence_count"] == 2
    assert "was merged into" in _html(client.get(f"/ui/incidents/{b}"))
    again = client.post(f"/ui/incidents/{b}/merge", data={"into": str(a)})
    assert again.status_code == 409
    assert client.post(f"/ui/incidents/{a}/merge", data={"into": "x"}).status_code == 400


def test_writes_need_the_token_when_tokens_are_set(db):
    with api_client(db) as open_client:
        incident_id = upload(open_client, vllm_log()).json()["incident"]["id"]
    with api_client(db, api_tokens=("s3cret",)) as client:
        assert client.get("/ui/incidents").status_code == 200
        assert "Sign in" in _html(client.get(f"/ui/incidents/{incident_id}"))
        denied = client.post(f"/ui/incidents/{incident_id}/fixes",
                             data={"title": "t", "kind": "config", "change": "flags=--enforce-eager"})
        assert denied.status_code == 401 and "sign in first" in _html(denied)
        assert client.post("/ui/upload", data={"text": vllm_log(), "mode": "store"}).status_code == 401
        # analysing without storing needs no token, like POST /analyze
        assert client.post("/ui/upload", data={"text": vllm_log(), "mode": "analyze"}).status_code == 200
        assert client.get(f"/incidents/{incident_id}").json()["fixes"] == []

        wrong = client.post("/ui/signin", data={"token": "nope", "next": "/ui/upload"})
        assert wrong.status_code == 401
        ok = client.post("/ui/signin", data={"token": "s3cret", "next": f"/ui/incidents/{incident_id}"},
                         follow_redirects=False)
        assert ok.status_code == 303 and ok.headers["location"].startswith(f"/ui/incidents/{incident_id}")
        cookie = ok.headers["set-cookie"]
        assert "kb_token=s3cret" in cookie and "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
        allowed = client.post(f"/ui/incidents/{incident_id}/fixes", data={"title": "t", "kind": "config", "change": "flags=--enforce-eager"},
                              follow_redirects=False)
        assert allowed.status_code == 303
        assert "Sign out" in _html(client.get(f"/ui/incidents/{incident_id}"))
        # off-site redirects after sign-in are refused
        evil = client.post("/ui/signin", data={"token": "s3cret", "next": "//evil.example/"},
                           follow_redirects=False)
        assert evil.headers["location"].startswith("/ui/incidents")
        client.post("/ui/signout")
        client.cookies.clear()
        assert client.post(f"/ui/incidents/{incident_id}/edit", data={"title": "x"}).status_code == 401


def test_notices_are_the_kbs_own_words_not_the_links(client):
    """A redirect's notice comes from a fixed list filled with numbers: a crafted link
    can neither put its own text on the page nor inject markup through a field."""
    a = upload(client, vllm_log()).json()["incident"]["id"]
    b = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    merged = client.post(f"/ui/incidents/{b}/merge", data={"into": str(a)}, follow_redirects=False)
    assert merged.headers["location"] == f"/ui/incidents/{a}?done=merged&merged={b}&into={a}"
    page = _html(client.get(merged.headers["location"]))
    assert f'<p class="flash" role="status">Merged #{b} into #{a}.</p>' in page

    for query in ("msg=Apply+the+fix+at+evil.example", "done=Trust+me", f"done=merged&merged={b}",
                  "done=merged&merged=1&into=2%3Cb%3E", "done=worked&fix=%D9%A3"):
        assert 'class="flash"' not in _html(client.get(f"/ui/incidents/{a}?{query}")), query


def test_writes_from_another_sites_pages_are_refused(client):
    """A page of another site can make the browser post to the KB (no token needed when
    KB_API_TOKENS is unset): browsers say so in Sec-Fetch-Site or Origin, and such writes
    are refused before anything is stored. Same-origin forms, curl and the launch wrapper
    (no such headers) still write."""
    a = upload(client, vllm_log()).json()["incident"]["id"]
    form = {"title": "Lower gpu_memory_utilization", "kind": "config", "change": "flags=--gpu-memory-utilization 0.85"}
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                    {"Origin": "http://evil.example"}, {"Origin": "null"}):
        refused = client.post(f"/ui/incidents/{a}/fixes", data=form, headers=headers)
        assert refused.status_code == 403 and "cross-origin" in refused.text, headers  # a page
        refused = client.post("/incidents", files={"log": ("vllm.log", vllm_log(**NCCL).encode())},
                              headers=headers)
        assert refused.status_code == 403, headers
    assert client.get(f"/incidents/{a}").json()["fixes"] == []
    assert client.get("/incidents").json()["total"] == 1
    # reading from anywhere is fine
    assert client.get(f"/ui/incidents/{a}", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200

    for headers in ({"Sec-Fetch-Site": "same-origin"}, {"Origin": BASE_URL}, {}):
        ok = client.post(f"/ui/incidents/{a}/fixes", data=form, headers=headers, follow_redirects=False)
        assert ok.status_code == 303, headers
    assert len(client.get(f"/incidents/{a}").json()["fixes"]) == 3


def test_only_loopback_host_names_are_answered_on_a_loopback_bind(db):
    """DNS rebinding: a page of evil.example points its name at 127.0.0.1 and is then
    same-origin with the KB; only the Host header gives it away. On a loopback bind
    (the default) the KB answers loopback names only, unless KB_ALLOWED_HOSTS lists more."""
    with api_client(db) as client:
        incident = upload(client, vllm_log()).json()["incident"]["id"]
        for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:8000", "[::1]:8000"):
            assert client.get(f"/incidents/{incident}", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example:8000", "evil.example", "127.0.0.1.evil.example", ""):
            refused = client.get(f"/ui/incidents/{incident}", headers={"Host": host})
            assert refused.status_code == 400 and "KB_ALLOWED_HOSTS" in refused.text, host  # a page
        refused = client.post("/incidents", files={"log": ("vllm.log", vllm_log(**NCCL).encode())},
                              headers={"Host": "evil.example:8000"})
        assert refused.status_code == 400
        assert client.get("/incidents").json()["total"] == 1
    with api_client(db, allowed_hosts=("kb.example.com",)) as client:
        assert client.get("/healthz", headers={"Host": "kb.example.com"}).status_code == 200
        assert client.get("/healthz", headers={"Host": "evil.example"}).status_code == 400
    for settings in ({"host": "0.0.0.0"}, {"allowed_hosts": ("*",)}):
        with api_client(db, **settings) as client:
            assert client.get("/healthz", headers={"Host": "kb.example.com"}).status_code == 200


def test_sparkline_points():
    spark = sparkline([0, 1, 4, 0], width=40, height=20)
    assert spark["total"] == 5 and spark["peak"] == 4
    assert [(b["x"], b["n"]) for b in spark["bars"]] == [(10.0, 1), (20.0, 4)]
    tallest = spark["bars"][1]
    assert tallest["y"] + tallest["h"] == 20 and tallest["h"] == 18
    assert sparkline([0] * 30)["bars"] == []


def test_list_chart_counts_occurrences_per_day(client, db):
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update

    from kb.db.models import Occurrence
    from kb.services.queries import TIMELINE_DAYS

    first = upload(client, vllm_log()).json()
    for seed in (1, 2):
        upload(client, vllm_log(seed=seed))
    with db.write() as session:  # the first upload happened three days ago
        session.execute(update(Occurrence).where(Occurrence.id == first["occurrence"]["id"])
                        .values(created_at=datetime.now(UTC) - timedelta(days=3)))
    # the chart renders the timeline the JSON list carries
    timeline = client.get("/incidents").json()["items"][0]["timeline"]
    daily = timeline["counts"]
    assert timeline["days"] == len(daily) == TIMELINE_DAYS and sum(daily) == 3
    assert daily[-1] == 2 and daily[-4] == 1
    today = datetime.now(UTC).date()
    assert timeline["start"] == (today - timedelta(days=TIMELINE_DAYS - 1)).isoformat()
    page = _html(client.get("/ui/incidents"))
    assert "3 occurrences in the last 30 days, at most 2 a day" in page


def test_edit_fix_form_on_the_detail_page(client):
    incident_id = upload(client, vllm_log()).json()["incident"]["id"]
    fix = client.post(f"/incidents/{incident_id}/fixes", json={
        "title": "Lower utilization", "kind": "config", "description": "<b>old</b>",
        "change": {"flags": ["--gpu-memory-utilization 0.85"]},
        "applies_to": {"engine": "vllm"}}).json()
    page = _html(client.get(f"/ui/incidents/{incident_id}"))
    assert f'action="/ui/fixes/{fix["id"]}/edit"' in page
    assert "&lt;b&gt;old&lt;/b&gt;" in page and "<b>old</b>" not in page
    assert "engine=vllm" in page and "flags=--gpu-memory-utilization 0.85" in page  # as the form reads them

    saved = client.post(f"/ui/fixes/{fix['id']}/edit", follow_redirects=False, data={
        "title": "Raise utilization", "kind": "workaround", "description": "",
        "change": '{"flags": ["--gpu-memory-utilization 0.95"]}',
        "applies_to": "engine=vllm\nengine_versions=>=0.10"})
    assert saved.status_code == 303
    assert saved.headers["location"].startswith(f"/ui/incidents/{incident_id}")
    assert f"#fix-{fix['id']}" in saved.headers["location"]
    after = client.get(f"/incidents/{incident_id}").json()["fixes"][0]
    assert (after["title"], after["kind"], after["description"]) == ("Raise utilization", "workaround", None)
    assert after["change"] == {"flags": ["--gpu-memory-utilization 0.95"]}
    assert after["applies_to"] == {"engine": "vllm", "engine_versions": ">=0.10"}
    assert after["edited_at"]

    bad = client.post(f"/ui/fixes/{fix['id']}/edit", data={"title": "x", "kind": "prayer"})
    assert bad.status_code == 400 and "kind: &#39;prayer&#39; is not a fix kind" in _html(bad)
    bad = client.post(f"/ui/fixes/{fix['id']}/edit", data={"title": "x", "kind": "config",
                                                           "applies_to": "nonsense"})
    assert bad.status_code == 400 and "applies_to: lines look like key=value" in _html(bad)
    assert client.post("/ui/fixes/999999/edit", data={"title": "x", "kind": "config", "change": "flags=--enforce-eager"}).status_code == 404


def test_editing_a_fix_in_the_ui_needs_the_token(db):
    with api_client(db) as open_client:
        incident_id = upload(open_client, vllm_log()).json()["incident"]["id"]
        fix_id = open_client.post(f"/incidents/{incident_id}/fixes",
                                  json={"title": "t", "kind": "config", "change": {"flags": ["--enforce-eager"]}}).json()["id"]
    with api_client(db, api_tokens=("s3cret",)) as client:
        denied = client.post(f"/ui/fixes/{fix_id}/edit", data={"title": "changed", "kind": "config", "change": "flags=--enforce-eager"})
        assert denied.status_code == 401 and "sign in first" in _html(denied)
        client.post("/ui/signin", data={"token": "s3cret", "next": "/ui/incidents"})
        ok = client.post(f"/ui/fixes/{fix_id}/edit", data={"title": "changed", "kind": "config", "change": "flags=--enforce-eager"},
                         follow_redirects=False)
        assert ok.status_code == 303
        assert client.get(f"/incidents/{incident_id}").json()["fixes"][0]["title"] == "changed"


def test_detail_page_shows_the_launch_wrapper_fields(client):
    body = upload(client, vllm_log(), cuda_visible_devices="2,3", torch_version="2.8.0",
                  failure="not_ready").json()
    page = _html(client.get(f"/ui/incidents/{body['incident']['id']}"))
    assert "CUDA_VISIBLE_DEVICES=2,3" in page and "torch 2.8.0" in page and "never ready" in page


def test_reads_need_the_token_when_protect_reads_is_set(db):
    """KB_PROTECT_READS: the API answers 401 to a read without a token, a page sends the
    browser to sign in and back; /healthz and the sign-in page stay open."""
    with api_client(db, api_tokens=("s3cret",), protect_reads=True) as client:
        incident = upload(client, vllm_log(), **{}).status_code  # a write without a token
        assert incident == 401
        stored = client.post("/incidents", files={"log": ("vllm.log", vllm_log().encode(), "text/plain")},
                             headers={"Authorization": "Bearer s3cret"}).json()
        assert client.get("/incidents").status_code == 401
        log_url = f"/occurrences/{stored['occurrence']['id']}/log"
        assert client.get(log_url).status_code == 401
        assert client.get(log_url, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        page = client.get(f"/ui/incidents/{stored['incident']['id']}", follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"] == f"/ui/signin?next=%2Fui%2Fincidents%2F{stored['incident']['id']}"
        assert client.get("/healthz").status_code == 200
        assert client.get("/ui/signin").status_code == 200
        client.cookies.set("kb_token", "s3cret")
        assert client.get(f"/ui/incidents/{stored['incident']['id']}").status_code == 200
    with api_client(db, api_tokens=("s3cret",)) as client:  # the default: reads are open
        assert client.get("/incidents").status_code == 200


def test_a_page_error_is_a_page(client):
    missing = client.get("/ui/incidents/999999")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    bad_id = client.get("/ui/incidents/99999999999999999999")
    assert bad_id.status_code == 400 and bad_id.headers["content-type"].startswith("text/html")
    assert "<h1>" in bad_id.text


def test_the_page_of_a_merged_incident_offers_the_unmerge(client):
    a = upload(client, vllm_log()).json()["incident"]["id"]
    b = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    client.post(f"/incidents/{b}/merge", json={"into": a})
    page = client.get(f"/ui/incidents/{b}").text
    assert f'action="/ui/incidents/{b}/unmerge"' in page
    done = client.post(f"/ui/incidents/{b}/unmerge", follow_redirects=False)
    assert done.status_code == 303 and "done=unmerged" in done.headers["location"]
    page = client.get(done.headers["location"]).text
    assert f"Unmerged #{b}" in page and "undone" in page
    assert client.get(f"/incidents/{b}").json()["merged_into"] is None
