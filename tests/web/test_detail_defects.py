"""The incident page's defects reported in issue 16: merging a curated incident into a
user's own is not offered (the other direction is), an incident with an upload never
says "No upload stored yet", and long links wrap."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text

from tests.service.helpers import api_client, upload
from tests.service.logs import NCCL, vllm_log
from tests.service.test_log_search import WRAPPER_ONLY

VARIANT = ("NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
           "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5")


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


def test_a_curated_incident_is_merged_into_by_its_duplicate_never_the_other_way(client, db):
    curated = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
    with db.engine.begin() as conn:  # as if it came from the seeds
        conn.execute(text("UPDATE incidents SET seeded = :yes WHERE id = :id"),
                     {"yes": True, "id": curated})
    own = upload(client, vllm_log(exception=NCCL["exception"], message=VARIANT)).json()
    assert own["match"]["status"] == "similar", own["match"]
    own_id = own["incident"]["id"]

    detail = client.get(f"/incidents/{own_id}").json()
    assert [(s["incident_id"], s["seeded"]) for s in detail["similar"]] == [(curated, True)]
    page = client.get(f"/ui/incidents/{own_id}").text
    assert f"Merge #{curated} into this" not in page
    assert f"Merge this into #{curated}" in page
    assert re.search(rf'action="/ui/incidents/{own_id}/merge".*?name="into" value="{curated}"',
                     page, re.S)
    # from the curated incident's page, the user's duplicate may be merged into it
    page = client.get(f"/ui/incidents/{curated}").text
    assert f"Merge #{own_id} into this" in page and "Merge this into" not in page


def test_an_incident_with_an_upload_never_says_no_upload_stored(client):
    wrapper = upload(client, WRAPPER_ONLY).json()["incident"]["id"]
    page = client.get(f"/ui/incidents/{wrapper}").text
    assert "No upload stored yet" not in page
    assert "root cause was not captured" in page
    assert "Cause not captured" in page  # the title


def test_long_links_wrap_inside_the_side_column(client):
    css = client.get("/ui/static/kb.css").text
    assert re.search(r"\.col-side a[^{]*\{[^}]*overflow-wrap:\s*anywhere", css)
