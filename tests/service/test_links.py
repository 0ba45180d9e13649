"""Links are made at the edge (kb.web.links), on SQLite and Postgres: services return ids,
and every answer, page and webhook payload carries absolute links on the address the
client reached, KB_PUBLIC_URL when it is set."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

from kb.db.models import NotificationOutbox
from kb.services import views
from kb.web.links import _answer_record, _INCIDENT_URL
from tests.service.helpers import api_client, upload
from tests.service.logs import vllm_log

PUBLIC = "https://kb.example.org/crash"


def test_answers_pages_and_events_link_on_the_public_url(db):
    hook = "json=http://127.0.0.1:9/hook"  # never answers: the payload stays in the outbox
    with api_client(db, public_url=PUBLIC + "/", webhooks=(hook,), webhook_retry_seconds=3600) as client:
        stored = upload(client, vllm_log()).json()
        incident, occurrence = stored["incident"]["id"], stored["occurrence"]["id"]
        assert stored["incident"]["url"] == f"{PUBLIC}/incidents/{incident}"
        detail = client.get(f"/incidents/{incident}").json()
        assert detail["url"] == f"{PUBLIC}/incidents/{incident}"
        assert detail["occurrences"][0]["log_url"] == f"{PUBLIC}/occurrences/{occurrence}/log"
        found = client.get("/incidents", params={"q": "gpu_memory_utilization"}).json()["items"][0]
        assert found["url"] == f"{PUBLIC}/incidents/{incident}"
        assert found["log_match"]["log_url"] == f"{PUBLIC}/occurrences/{occurrence}/log"
        page = client.get(f"/ui/incidents/{incident}").text
        assert f'href="{PUBLIC}/occurrences/{occurrence}/log"' in page
        assert f"  {PUBLIC}/incidents/{incident}\n" in client.get(f"/incidents/{incident}?format=text").text
        assert client.get("/dashboard").json()["top"][0]["url"] == f"{PUBLIC}/incidents/{incident}"
    with db.read() as session:
        payload = session.scalars(select(NotificationOutbox)).one().payload
    assert payload["incident"]["url"] == f"{PUBLIC}/incidents/{incident}"
    assert payload["occurrence"]["log_url"] == f"{PUBLIC}/occurrences/{occurrence}/log"


def test_the_services_structs_hold_ids_not_links():
    for struct in (views.IncidentRef, views.IncidentSummary, views.LogMatchView, views.IncidentDetail,
                   views.LinkedIncident, views.OccurrenceView, views.DashboardIncident,
                   views.BucketIncident):
        assert not {"url", "log_url"} & {f.name for f in dataclasses.fields(struct)}, struct


def test_an_answer_record_declares_every_field_holding_a_linked_struct():
    """Else the answer would carry that struct without its links."""
    with pytest.raises(TypeError, match="IncidentDetail.merged_into holds a linked struct"):
        @_answer_record(_INCIDENT_URL)
        class IncidentDetail(views.IncidentDetail):
            url: str
