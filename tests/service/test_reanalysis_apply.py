"""`kb reanalyze` (without --dry-run) on a KB grouped by older rules: it regroups the
incidents exactly as the dry run predicted, one transaction per incident; a second run
changes nothing; what a person merged stays merged; an incident whose log cannot be read
is left untouched while the others are applied."""

from __future__ import annotations

from collections import Counter

from click.testing import CliRunner
from sqlalchemy import text

from kb.cli import main
from kb.core.recall import terms
from kb.services.reanalysis import BY, apply, plan
from kb.services.ruleset import ruleset
from tests.service.helpers import api_client, upload
from tests.service.logs import HEADS, NCCL, vllm_log

SNAPSHOT = {
    "incidents": "SELECT id, merged_into_id, occurrence_count, first_seen, last_seen, fingerprint_hash, "
                 "recommended_path, updated_at FROM incidents ORDER BY id",
    "occurrences": "SELECT id, incident_id, fingerprint_hash, ruleset FROM occurrences ORDER BY id",
    "fingerprints": "SELECT id, incident_id, route_key, source FROM incident_fingerprints ORDER BY id",
    "facets": "SELECT incident_id, kind, value FROM incident_facets ORDER BY incident_id, kind, value",
    "merges": "SELECT id, source_id, target_id, undone_at FROM incident_merges ORDER BY id",
    "terms": "SELECT term, templates FROM template_terms WHERE templates > 0 ORDER BY term",
}


def snapshot(db):
    with db.read() as session:
        return {name: session.execute(text(sql)).all() for name, sql in SNAPSHOT.items()}


def where(db):
    """occurrence id -> incident id"""
    with db.read() as session:
        return dict(session.execute(text("SELECT id, incident_id FROM occurrences")).all())


def build_with_older_rules(db):
    """Four uploads (an OOM, an NCCL error, another ValueError, the OOM again), then the
    database as older rules left it: other stored fingerprints and routes everywhere,
    the NCCL crash grouped with the OOM, the OOM's second log grouped with `heads`."""
    with api_client(db) as client:
        oom = upload(client, vllm_log()).json()["incident"]["id"]
        nccl = upload(client, vllm_log(**NCCL)).json()["incident"]["id"]
        heads = upload(client, vllm_log(**HEADS)).json()["incident"]["id"]
        again = upload(client, vllm_log(seed=4)).json()
    assert again["incident"]["id"] == oom
    with db.write() as session:
        session.execute(text("UPDATE occurrences SET fingerprint_hash = 'v3-' || id, ruleset = 'v3-old', "
                             "search_text = NULL"))  # stored before the log search, too
        session.execute(text("UPDATE incident_fingerprints SET route_key = 'v3-' || id, hash = 'v3-' || id"))
        session.execute(text("UPDATE occurrences SET incident_id = :to WHERE incident_id = :from"),
                        {"to": oom, "from": nccl})
        session.execute(text("UPDATE occurrences SET incident_id = :to WHERE id = :id"),
                        {"to": heads, "id": again["occurrence"]["id"]})
        session.execute(text("UPDATE incidents SET occurrence_count = 2 WHERE id IN (:a, :b)"), {"a": oom, "b": heads})
        session.execute(text("UPDATE incidents SET occurrence_count = 0 WHERE id = :id"), {"id": nccl})
    ids = sorted(where(db))
    return oom, nccl, heads, ids


def test_apply_regroups_as_the_dry_run_predicted_and_a_second_run_changes_nothing(db):
    oom, nccl, heads, (o_oom, o_nccl, o_heads, o_again) = build_with_older_rules(db)
    before = snapshot(db)
    predicted = plan(db)
    assert snapshot(db) == before  # the dry run writes nothing
    assert predicted.moves and predicted.other_rulesets == 4 and predicted.changed == 4

    done = apply(db)
    assert done.failures == []
    for name in ("occurrences", "other_rulesets", "changed", "unidentified", "pinned", "moves",
                 "new_incidents", "splits", "merges", "folded", "routes_added", "routes_dropped"):
        assert getattr(done, name) == getattr(predicted, name), name
    # the groups the installed rules make: each crash on its own incident again
    assert where(db) == {o_oom: oom, o_again: oom, o_nccl: nccl, o_heads: heads}
    assert sorted(done.moves) == [(o_nccl, oom, nccl), (o_again, heads, oom)]
    with db.read() as session:
        stored = session.execute(text("SELECT fingerprint_hash, ruleset FROM occurrences")).all()
        assert all(h.startswith("v3-") is False and r == ruleset() for h, r in stored)
        counts = dict(session.execute(text("SELECT id, occurrence_count FROM incidents")).all())
        assert counts == {oom: 2, nccl: 1, heads: 1}
        routes = session.execute(text("SELECT route_key FROM incident_fingerprints")).scalars().all()
        assert not any(r.startswith("v3-") for r in routes)  # the old routes are dropped
        # the term counts match the fingerprints that remain
        templates = session.execute(text("SELECT message_template FROM incident_fingerprints")).scalars()
        expected = Counter()
        for template in templates:
            if template:
                expected.update({t[:120] for t in terms(template)} | {""})
        stored_terms = dict(session.execute(text("SELECT term, templates FROM template_terms "
                                                 "WHERE templates > 0")).all())
        assert stored_terms == dict(expected)
    with api_client(db) as client:  # the moves are on the curator's pages, and routes work
        merges = client.get(f"/incidents/{nccl}").json()["merges"]
        assert [(m["source_id"], m["target_id"], m["by"], m["ruleset"], m["occurrences"]) for m in merges] \
            == [(oom, nccl, BY, ruleset(), 1)]
        page = client.get(f"/ui/incidents/{nccl}").text
        assert f"re-analysis ({ruleset()}) moved 1 occurrence(s) of" in page
        assert upload(client, vllm_log(**NCCL, seed=9)).json()["incident"]["id"] == nccl
        assert upload(client, vllm_log(seed=7)).json()["incident"]["id"] == oom
        # the log search's excerpts are rewritten with the analysis: the moved log is found
        found = client.get("/incidents", params={"q": "ProcessGroupNCCL.cpp", "sort": "relevance"}).json()
        assert nccl in [i["id"] for i in found["items"]]
    with db.read() as session:
        assert session.execute(text("SELECT count(*) FROM occurrences WHERE search_text IS NULL")).scalar() == 0

    settled = snapshot(db)
    again = apply(db)
    assert again.moves == [] and again.rewritten == 0 and again.routes_added == again.routes_dropped == 0
    assert snapshot(db) == settled  # idempotent: nothing written at all
    assert plan(db).moves == []


def test_an_emptied_uploaded_incident_is_folded_with_its_fixes_and_can_be_unmerged(db):
    with api_client(db) as client:
        oom = upload(client, vllm_log()).json()["incident"]["id"]
        dup = upload(client, vllm_log(**NCCL)).json()
        fix = client.post(f"/incidents/{dup['incident']['id']}/fixes",
                          json={"title": "Disable P2P", "kind": "config",
                                "change": {"flags": ["--disable-custom-all-reduce"]}})
        assert fix.status_code == 201, fix.text
        nccl = upload(client, vllm_log(**NCCL, seed=3)).json()["incident"]["id"]
    assert nccl == dup["incident"]["id"]
    # older rules: the NCCL crash had two incidents, the newer one holding its route
    with db.write() as session:
        session.execute(text("UPDATE occurrences SET ruleset = 'v3-old'"))
        newer = session.execute(text("INSERT INTO incidents (title, tags, links, model_archs, gpu_families, "
                                     "recommended_path, seeded, engine_limitation, occurrence_count, created_at, "
                                     "updated_at) VALUES ('older rules', '[]', '[]', '[]', '[]', 'investigate', "
                                     ":f, :f, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) RETURNING id"),
                                {"f": False}).scalar_one()
        session.execute(text("UPDATE incident_fingerprints SET incident_id = :to WHERE incident_id = :from"),
                        {"to": newer, "from": nccl})
    predicted = plan(db)
    done = apply(db)
    assert done.folded == predicted.folded == [(nccl, newer)]
    with api_client(db) as client:
        folded = client.get(f"/incidents/{nccl}").json()
        assert folded["merged_into"]["id"] == newer
        target = client.get(f"/incidents/{newer}").json()
        assert [f["title"] for f in target["fixes"]] == ["Disable P2P"]
        assert target["occurrence_count"] == 2
        undone = client.post(f"/incidents/{nccl}/unmerge")  # a curator disagrees
        assert undone.status_code == 200, undone.text
        assert undone.json()["occurrence_count"] == 2 and len(undone.json()["fixes"]) == 1
    assert oom not in {i for i, _ in done.folded}
    placed = where(db)
    again = apply(db)  # the curator's decision holds: the logs stay on the unmerged incident
    assert (again.moves, again.folded, again.pinned) == ([], [], 2)
    assert where(db) == placed


def test_a_person_s_merge_survives_the_regrouping(db):
    with api_client(db) as client:
        oom = upload(client, vllm_log()).json()["incident"]["id"]
        nccl_upload = upload(client, vllm_log(**NCCL)).json()
        heads = upload(client, vllm_log(**HEADS)).json()["incident"]["id"]
        merged = client.post(f"/incidents/{nccl_upload['incident']['id']}/merge", json={"into": oom})
        assert merged.status_code == 200, merged.text
    # the installed rules route the NCCL crash's identity to `heads` (as if its crash and
    # the NCCL one were now one): the merged occurrence would follow it, but a person put
    # it on `oom`
    with db.write() as session:
        session.execute(text("UPDATE incident_fingerprints SET incident_id = :to "
                             "WHERE incident_id = :from AND exception = :exc"),
                        {"to": heads, "from": oom, "exc": NCCL["exception"].rsplit(".", 1)[-1]})
    pinned = nccl_upload["occurrence"]["id"]
    predicted = plan(db)
    done = apply(db)
    assert done.pinned == predicted.pinned == 1
    assert done.moves == predicted.moves == []
    assert where(db)[pinned] == oom


def test_an_unreadable_log_leaves_its_incident_untouched_and_the_others_applied(db):
    oom, nccl, heads, (o_oom, o_nccl, o_heads, o_again) = build_with_older_rules(db)
    with db.write() as session:  # `heads` holds a log nobody can decode any more
        session.execute(text("UPDATE occurrences SET log_compressed = :junk WHERE id = :id"),
                        {"junk": b"not a log", "id": o_heads})
    before = snapshot(db)
    predicted = plan(db)
    assert [i for i, _ in predicted.failures] == [heads]

    result = CliRunner().invoke(main, ["reanalyze", "--database-url", db.url])
    assert result.exit_code == 1, result.output
    assert "incidents not re-analyzed (left untouched): 1" in result.output
    assert f"#{heads}: ValueError: stored log is neither zstd nor gzip" in result.output
    assert "moved to another incident:  1" in result.output
    after = snapshot(db)
    # `heads` and its occurrences exactly as before; `oom` gave the NCCL crash back
    assert [r for r in after["occurrences"] if r[1] == heads] == \
        [r for r in before["occurrences"] if r[1] == heads]
    assert [r for r in after["incidents"] if r[0] == heads] == [r for r in before["incidents"] if r[0] == heads]
    assert where(db) == {o_oom: oom, o_nccl: nccl, o_heads: heads, o_again: heads}
    with db.read() as session:
        rules = dict(session.execute(text("SELECT id, ruleset FROM occurrences")).all())
    assert rules == {o_oom: ruleset(), o_nccl: ruleset(), o_heads: "v3-old", o_again: "v3-old"}


def test_seeded_incidents_keep_their_fixes_and_take_their_crashes_back(db):
    from kb.services.seeding import seed_database
    from tests.service.helpers import SAMPLE_SEEDS

    assert not seed_database(db, SAMPLE_SEEDS).errors
    with api_client(db) as client:
        oom = upload(client, vllm_log()).json()
        odd = upload(client, vllm_log(exception="RuntimeError",
                                      message="CUDA error: an illegal memory access was encountered")).json()
        assert oom["match"]["status"] == "known" and odd["match"]["status"] == "new"
        seeded = {i["slug"]: i["id"] for i in client.get("/incidents", params={"limit": 50}).json()["items"]
                  if i.get("slug")}
    kv, nccl = seeded["sample-kv-cache-no-memory"], seeded["sample-nccl-capture"]
    assert oom["incident"]["id"] == kv
    with db.write() as session:  # older rules: both crashes grouped on the NCCL seed
        session.execute(text("UPDATE occurrences SET incident_id = :to, ruleset = 'v3-old'"), {"to": nccl})
        fixes_before = session.execute(text("SELECT id, incident_id, title FROM fixes ORDER BY id")).all()
    predicted = plan(db)
    done = apply(db)
    assert done.moves == predicted.moves
    assert where(db) == {oom["occurrence"]["id"]: kv, odd["occurrence"]["id"]: odd["incident"]["id"]}
    assert done.folded == []  # the emptied seed stays, with its fixes
    with db.read() as session:
        assert session.execute(text("SELECT id, incident_id, title FROM fixes ORDER BY id")).all() == fixes_before
        state = session.execute(text("SELECT merged_into_id, occurrence_count, seeded FROM incidents "
                                     "WHERE id = :id"), {"id": nccl}).one()
    assert (state[0], state[1], bool(state[2])) == (None, 0, True)


def test_what_the_uploader_said_survives_the_reanalysis(db):
    with api_client(db) as client:
        sent = upload(client, vllm_log(), engine="sglang", gpu="NVIDIA A100-SXM4-80GB", tp=2).json()
        plain = upload(client, vllm_log(seed=2)).json()
    assert sent["incident"]["id"] != plain["incident"]["id"]  # another engine: its own incident
    with db.write() as session:
        session.execute(text("UPDATE occurrences SET ruleset = 'v3-old'"))
    done = apply(db)
    assert done.moves == [] and done.rewritten == 2
    with db.read() as session:
        rows = dict((r[0], r[1:]) for r in session.execute(text("SELECT id, engine, gpu_name, tp FROM occurrences")))
        facets = session.execute(text("SELECT value FROM incident_facets WHERE incident_id = :id AND kind = 'gpu'"),
                                 {"id": sent["incident"]["id"]}).scalars().all()
    assert rows[sent["occurrence"]["id"]] == ("sglang", "NVIDIA A100-SXM4-80GB", 2)
    assert facets == ["nvidia a100-sxm4-80gb"]


def test_a_kb_built_by_the_installed_rules_is_left_as_it_is(db):
    """Nothing moves and nothing is written, not even where a fuzzy match placed a log
    that today's term weights would score otherwise: the rules have not changed."""
    from kb.services.seeding import seed_database
    from tests.service.helpers import SAMPLE_SEEDS

    seed_database(db, SAMPLE_SEEDS)
    with api_client(db) as client:
        answers = [upload(client, log).json() for log in (
            vllm_log(), vllm_log(**NCCL, seed=1), vllm_log(**HEADS, tp=8),
            vllm_log(message="No available memory for the cache blocks (12 blocks short)."),
            vllm_log(exception="RuntimeError", message="CUDA error: an illegal memory access was encountered"),
            vllm_log(exception="RuntimeError", message="CUDA error: an illegal memory access was encountered "
                                                       "on device 3", seed=6))]
    assert [a["match"]["status"] for a in answers] == ["known", "known", "known", "similar", "new", "known"]
    # as if the "similar" one had scored "known" (below the alias threshold) when it came:
    # stored on its closest incident, no incident and no route of its own
    drifted = answers[3]
    own, closest = drifted["incident"]["id"], drifted["match"]["incident_id"]
    with db.write() as session:
        for table in ("incident_fingerprints", "incident_facets"):
            session.execute(text(f"DELETE FROM {table} WHERE incident_id = :id"), {"id": own})
        session.execute(text("UPDATE occurrences SET incident_id = :to WHERE id = :id"),
                        {"to": closest, "id": drifted["occurrence"]["id"]})
        session.execute(text("DELETE FROM incidents WHERE id = :id"), {"id": own})
        session.execute(text("UPDATE incidents SET occurrence_count = occurrence_count + 1, last_seen = "
                             "(SELECT max(created_at) FROM occurrences WHERE incident_id = :id) WHERE id = :id"),
                        {"id": closest})
    before = snapshot(db)
    assert plan(db).moves == []
    done = apply(db)
    assert (done.moves, done.routes_added, done.routes_dropped, done.rewritten) == ([], 0, 0, 0)
    assert snapshot(db) == before
