"""`kb reanalyze --dry-run` on a KB grouped by older rules: the stored fingerprints and
groupings differ from what the installed analyzer says, and the report names each
move, split and join without changing anything."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy import text

from kb.cli import main
from kb.services.reanalysis import plan
from kb.services.ruleset import ruleset
from tests.service.helpers import api_client, upload
from tests.service.logs import HEADS, NCCL, vllm_log


def test_dry_run_reports_the_regrouping_of_a_kb_built_by_older_rules(db):
    with api_client(db) as client:
        oom = upload(client, vllm_log()).json()["incident"]["id"]
        nccl = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
        heads = upload(client, vllm_log(**HEADS)).json()["incident"]["id"]
        upload(client, vllm_log(seed=4))
    # What older rules did: another stored hash everywhere; the NCCL crash's occurrence
    # grouped with the OOM; the OOM's second log kept apart as incident `heads`.
    with db.write() as session:
        session.execute(text("UPDATE occurrences SET fingerprint_hash = 'v3-' || id"))
        session.execute(text("UPDATE occurrences SET incident_id = :to WHERE incident_id = :from"),
                        {"to": oom, "from": nccl})
        last = session.execute(text("SELECT max(id) FROM occurrences")).scalar_one()
        session.execute(text("UPDATE occurrences SET incident_id = :to WHERE id = :id"), {"to": heads, "id": last})
        before = session.execute(text("SELECT id, incident_id, fingerprint_hash FROM occurrences ORDER BY id")).all()

    report = plan(db)
    assert report.occurrences == 4 and report.changed == 4
    assert report.other_rulesets == 0  # stored by the installed rules: only the groupings were old
    assert oom in report.splits  # its logs: the OOM and the NCCL crash
    assert (oom, heads) in report.merges  # the OOM's two logs, in two incidents
    assert {(a, b) for _, a, b in report.moves} >= {(oom, nccl), (heads, oom)}
    with db.read() as session:  # a dry run writes nothing
        after = session.execute(text("SELECT id, incident_id, fingerprint_hash FROM occurrences ORDER BY id")).all()
    assert after == before

    result = CliRunner().invoke(main, ["reanalyze", "--dry-run", "--database-url", db.url])
    assert result.exit_code == 0, result.output
    assert "another fingerprint than stored: 4" in result.output
    assert f"#{oom}: its logs would go to 2 incidents" in result.output
    with db.write() as session:
        session.execute(text("UPDATE occurrences SET ruleset = NULL WHERE id = :id"), {"id": last})
    assert plan(db).other_rulesets == 1
    with api_client(db) as client:
        stored = client.get(f"/incidents/{oom}").json()["occurrences"]
        assert {o["ruleset"] for o in stored} == {ruleset()}
