"""One URL, three readers: curl gets the text report, programs the JSON they always got,
browsers the page; `?format=` overrides (kb/web/negotiate.py has the rule)."""

from __future__ import annotations

import pytest

from kb.services.seeding import read_seeds, seed_database
from kb.web.negotiate import answer_format
from tests.service.helpers import SAMPLE_SEEDS, api_client

CURL = {"User-Agent": "curl/8.5.0", "Accept": "*/*"}
BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0",
           "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
JSON = {"User-Agent": "curl/8.5.0", "Accept": "application/json"}
UPLOAD_KEYS = {"incident", "occurrence", "analysis", "match", "similar", "fixes",
               "recommendation", "created", "replayed"}


@pytest.mark.parametrize(("explicit", "accept", "agent", "expected"), [
    (None, "*/*", "curl/8.5.0", "text"),
    (None, None, "Wget/1.21.3", "text"),
    (None, "*/*", "python-httpx/0.28.1", "json"),
    (None, None, None, "json"),
    (None, "application/json", "curl/8.5.0", "json"),
    (None, "text/plain", "python-requests/2.32", "text"),
    (None, "text/*", "anything", "text"),
    (None, BROWSER["Accept"], BROWSER["User-Agent"], "html"),
    (None, "application/json;q=0.5, text/plain", "x", "text"),
    (None, "image/png", "curl/8.5.0", "text"),
    ("json", BROWSER["Accept"], BROWSER["User-Agent"], "json"),
    ("text", "application/json", "x", "text"),
])
def test_the_rule(explicit, accept, agent, expected):
    assert answer_format(explicit, accept, agent) == expected


@pytest.fixture
def seeded(db):
    seed_database(db, SAMPLE_SEEDS)
    loaded, _ = read_seeds(SAMPLE_SEEDS)
    seed = next(s for s in loaded if s.slug == "sample-kv-cache-no-memory")
    return db, seed.examples[0][1]


def _post(client, path, log, headers, **params):
    return client.post(path, files={"log": ("vllm.log", log.encode(), "text/plain")},
                       headers=headers, params=params)


@pytest.mark.parametrize("path", ["/incidents", "/analyze"])
def test_curl_gets_a_readable_report(seeded, path):
    db, log = seeded
    with api_client(db) as client:
        answer = _post(client, path, log, CURL)
    assert answer.status_code in (200, 201)
    assert answer.headers["content-type"].startswith("text/plain")
    assert "Accept" in answer.headers["vary"]
    text = answer.text
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert all(len(line) <= 100 for line in text.splitlines()), text
    lines = text.splitlines()
    assert lines[0].startswith("Crash KB: known incident #")
    assert "Root cause" in lines and "Fixes" in lines
    # root cause first, then the recommendation, then each fix with its exact change
    assert text.index("Root cause") < text.index("Recommendation: patch") < text.index("Fixes")
    assert "ValueError: No available memory for the cache blocks" in text
    assert "--gpu-memory-utilization 0.95" in text  # the fix's flag, not cut
    assert "/incidents/" in text


def test_json_keys_are_unchanged_for_clients_that_ask(seeded):
    db, log = seeded
    with api_client(db) as client:
        asked = _post(client, "/incidents", log, JSON)
        default = client.post("/incidents", files={"log": ("vllm.log", log.encode(), "text/plain")})
    for answer in (asked, default):  # a script that never set Accept keeps its JSON
        assert answer.headers["content-type"].startswith("application/json")
        assert set(answer.json()) == UPLOAD_KEYS


def test_a_browser_following_a_printed_url_lands_on_the_page(seeded):
    db, log = seeded
    with api_client(db) as client:
        stored = _post(client, "/incidents", log, JSON).json()
        url = stored["incident"]["url"]
        assert url.startswith("http://127.0.0.1/incidents/")
        page = client.get(url, headers=BROWSER)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert str(page.url).endswith(f"/ui/incidents/{stored['incident']['id']}")
        assert stored["incident"]["title"] in page.text
        # the page's JSON link gives the same struct the API returns
        assert f'/incidents/{stored["incident"]["id"]}?format=json' in page.text
        same = client.get(f"{url}?format=json", headers=BROWSER).json()
        assert same == client.get(url, headers=JSON).json()


def test_format_overrides_accept(seeded):
    db, log = seeded
    with api_client(db) as client:
        incident = _post(client, "/incidents", log, JSON).json()["incident"]["id"]
        text = client.get(f"/incidents/{incident}?format=text", headers=JSON)
        assert text.headers["content-type"].startswith("text/plain")
        assert text.text.startswith(f"Crash KB incident #{incident}\n")
        page = client.get(f"/incidents/{incident}?format=html", headers=JSON, follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == f"/ui/incidents/{incident}"
        assert client.get(f"/incidents/{incident}?format=yaml").status_code == 400
        listing = client.get("/incidents?format=text&q=cache")
        assert listing.text.startswith("Crash KB: 1 incident(s)\n")


def test_errors_read_as_text_in_a_terminal_and_json_elsewhere(db):
    with api_client(db) as client:
        as_text = _post(client, "/incidents", "   \n", CURL)
        as_json = _post(client, "/incidents", "   \n", JSON)
        missing = client.get("/incidents/999999", headers=CURL)
    assert as_text.status_code == as_json.status_code == 400
    assert as_text.text == "Crash KB: error 400\n  the log is empty\n"
    assert as_json.json()["detail"] == "the log is empty"
    assert missing.status_code == 404 and missing.text.startswith("Crash KB: error 404\n")


def test_security_headers_on_pages_docs_and_downloads(seeded):
    db, log = seeded
    with api_client(db) as client:
        stored = _post(client, "/incidents", log, JSON).json()
        page = client.get(f"/ui/incidents/{stored['incident']['id']}")
        docs = client.get("/schema")
        raw = client.get(f"/occurrences/{stored['occurrence']['id']}/log")
    policy = page.headers["content-security-policy"]
    assert "'unsafe-inline'" not in policy and "frame-ancestors 'none'" in policy
    assert "script-src 'self' 'unsafe-inline'" in docs.headers["content-security-policy"]
    for answer in (page, docs, raw):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
    assert raw.headers["content-type"] == "text/plain; charset=utf-8"
    assert "content-security-policy" not in raw.headers
