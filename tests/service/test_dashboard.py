"""The team dashboard (GET /dashboard, /ui/dashboard) on SQLite and Postgres: this week
against the previous one, counted from the occurrences' upload times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from tests.service.helpers import api_client, upload
from tests.service.logs import HEADS, NCCL, vllm_log


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def _move(db, occurrence_id: int, days_ago: int) -> None:
    """Pretend an upload happened `days_ago` days ago (and its incident was first seen
    then, when that is earlier)."""
    when = datetime.now(UTC) - timedelta(days=days_ago)
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE occurrences SET created_at = :t WHERE id = :id"), {"t": when, "id": occurrence_id})
        incident_id = conn.execute(text("SELECT incident_id FROM occurrences WHERE id = :id"),
                                   {"id": occurrence_id}).scalar_one()
        first = conn.execute(text("SELECT MIN(created_at) FROM occurrences WHERE incident_id = :i"),
                             {"i": incident_id}).scalar_one()
        conn.execute(text("UPDATE incidents SET first_seen = :t WHERE id = :i"), {"t": first, "i": incident_id})


def _week(client, db) -> dict[str, int]:
    """A: 3 uploads this week and 1 the week before (grew, recurring); B: 1 this week, new;
    C: 2 the week before only (fell), and 1 three weeks ago (outside both weeks)."""
    kv = dict(engine_version="0.11.0", gpu="NVIDIA H100 80GB HBM3", model_arch="kimi_k2")
    a = [upload(client, vllm_log(), **kv).json() for _ in range(4)]
    b = upload(client, vllm_log(**NCCL), engine_version="0.10.1", gpu="NVIDIA A100-SXM4-80GB",
               model_arch="llama").json()
    c = [upload(client, vllm_log(**HEADS), engine_version="0.9.2", model_arch="qwen3").json() for _ in range(3)]
    _move(db, a[0]["occurrence"]["id"], 8)
    _move(db, c[0]["occurrence"]["id"], 9)
    _move(db, c[1]["occurrence"]["id"], 10)
    _move(db, c[2]["occurrence"]["id"], 21)
    return {"a": a[0]["incident"]["id"], "b": b["incident"]["id"], "c": c[0]["incident"]["id"]}


def test_the_week_against_the_previous_one(client, db):
    ids = _week(client, db)
    d = client.get("/dashboard").json()
    assert (d["occurrences_this_week"], d["occurrences_previous_week"]) == (4, 3)
    assert len(d["daily"]) == 14 and d["daily"][-1]["occurrences"] == 4
    assert sum(day["occurrences"] for day in d["daily"]) == 7
    top = [(r["id"], r["this_week"], r["previous_week"], r["change"], r["trend"]) for r in d["top"]]
    assert top == [(ids["a"], 3, 1, 2, "grew"), (ids["b"], 1, 0, 1, "new")]
    assert d["top"][0]["daily"][-1] == 3 and sum(d["top"][0]["daily"][:7]) == 1
    assert [r["id"] for r in d["growing"]] == [ids["a"], ids["b"]]
    assert [r["id"] for r in d["new_incidents"]] == [ids["b"]]
    assert [r["id"] for r in d["recurring_incidents"]] == [ids["a"]]
    assert d["regressions"] == []

    def rows(key):
        return {b["label"]: (b["this_week"], b["previous_week"], b["incident_count"]) for b in d[key]}

    assert rows("by_engine_version") == {"vllm 0.11.0": (3, 1, 1), "vllm 0.10.1": (1, 0, 1),
                                         "vllm 0.9.2": (0, 2, 0)}
    assert rows("by_model_arch") == {"kimi_k2": (3, 1, 1), "llama": (1, 0, 1), "qwen3": (0, 2, 0)}
    gpus = rows("by_gpu_family")
    assert gpus["hopper"][0] == 3 and gpus["ampere"] == (1, 0, 1)
    version_row = next(b for b in d["by_engine_version"] if b["label"] == "vllm 0.11.0")
    assert version_row["incidents"][0]["id"] == ids["a"] and version_row["incidents"][0]["occurrences"] == 3


def test_a_merge_moves_the_counts(client, db):
    ids = _week(client, db)
    assert client.post(f"/incidents/{ids['b']}/merge", json={"into": ids["a"]}).status_code == 200
    d = client.get("/dashboard").json()
    assert [(r["id"], r["this_week"]) for r in d["top"]] == [(ids["a"], 4)]


def test_the_page_draws_its_charts_within_the_content_policy(client, db):
    _week(client, db)
    page = client.get("/ui/dashboard")
    assert page.status_code == 200
    html = page.text
    for chart in ("daily", "versions", "gpus", "archs", "split"):
        assert f'data-chart="{chart}"' in html
    assert html.count('class="chart series"') == 2  # the top two; both grew, so no "also grew" table
    assert "Also grew" not in html
    assert "<rect" in html and "kimi_k2" in html and "hopper" in html
    assert "style=" not in html and "<script" not in html  # the policy forbids both inline
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert 'href="/ui/dashboard" aria-current="page"' in html
    assert 'href="/ui/dashboard"' in client.get("/ui/incidents").text  # in the navigation


def test_an_empty_week_and_the_other_answer_forms(client):
    empty = client.get("/dashboard").json()
    assert empty["top"] == [] and empty["occurrences_this_week"] == 0 and len(empty["daily"]) == 14
    page = client.get("/ui/dashboard")
    assert page.status_code == 200 and "No crash was uploaded this week" in page.text
    report = client.get("/dashboard", params={"format": "text"})
    assert report.headers["content-type"].startswith("text/plain") and "no crash uploaded this week" in report.text
    browser = client.get("/dashboard", headers={"Accept": "text/html"}, follow_redirects=False)
    assert browser.status_code == 303 and browser.headers["location"] == "/ui/dashboard"


def test_a_resolved_incident_that_occurs_again_is_listed_as_a_regression(client, db):
    ids = _week(client, db)
    assert client.post(f"/incidents/{ids['a']}/resolve").status_code in (200, 201)
    assert client.get("/dashboard").json()["regressions"] == []  # resolved, not back yet
    upload(client, vllm_log(), engine_version="0.11.0")
    d = client.get("/dashboard").json()
    assert [(r["id"], r["this_week"]) for r in d["regressions"]] == [(ids["a"], 4)]
