"""Loading seeds: idempotent upsert by slug, edited seeds update only what the seed owns,
and every example log matches its own incident with the declared recommendation. On
SQLite and Postgres."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text

from kb.db.models import TABLES
from kb.services.seeding import SeedError, parse_seed, read_seeds, seed_database
from tests.service.helpers import SAMPLE_SEEDS, api_client, upload
from tests.service.logs import vllm_log


def dump(db) -> dict[str, list]:
    """Every row of every table, for before/after comparisons."""
    out = {}
    with db.engine.connect() as conn:
        for table in TABLES:
            rows = conn.execute(text(f"SELECT * FROM {table}")).mappings().all()
            out[table] = sorted(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows)
    return out


@pytest.fixture
def seeds(tmp_path: Path) -> Path:
    target = tmp_path / "seeds"
    shutil.copytree(SAMPLE_SEEDS, target)
    return target


def test_sample_seeds_parse():
    loaded, errors = read_seeds(SAMPLE_SEEDS)
    assert errors == []
    assert {s.slug for s in loaded} == {"sample-kv-cache-no-memory", "sample-heads-not-divisible",
                                        "sample-nccl-capture"}


def test_seeding_twice_changes_nothing(db, seeds):
    first = seed_database(db, seeds)
    assert (first.added, first.errors) == (3, [])
    before = dump(db)
    second = seed_database(db, seeds)
    assert (second.added, second.updated, second.unchanged) == (0, 0, 3)
    assert not second.changed
    assert dump(db) == before


def test_examples_match_their_own_incident_with_the_declared_recommendation(db):
    seed_database(db, SAMPLE_SEEDS)
    loaded, _ = read_seeds(SAMPLE_SEEDS)
    with api_client(db) as client:
        slugs = {i["id"]: i["slug"] for i in client.get("/incidents").json()["items"]}
        for seed in loaded:
            for name, log in seed.examples:
                body = upload(client, log).json()
                assert body["match"]["status"] == "known", (seed.slug, name)
                assert slugs[body["incident"]["id"]] == seed.slug, (seed.slug, name)
                assert body["recommendation"]["path"] == seed.recommendation, \
                    (seed.slug, body["recommendation"])
        # the chain: heads-not-divisible -> nccl-capture (an engine limitation)
        heads = next(i for i, s in slugs.items() if s == "sample-heads-not-divisible")
        detail = client.get(f"/incidents/{heads}").json()
        assert detail["next"]["title"].startswith("NCCL")
        assert [c["engine_limitation"] for c in detail["chain"]] == [True]
        assert detail["recommendation"]["engine"] == "sglang"
        nccl = client.get("/incidents", params={"q": "nccl"}).json()["items"][0]
        assert nccl["recommended_path"] == "switch_engine"
        assert client.get("/incidents", params={"version": "0.11.3", "engine": "vllm"}).json()["total"] >= 2


def test_edited_seed_updates_its_incident_and_seeded_fixes_only(db, seeds):
    seed_database(db, seeds)
    path = seeds / "vllm" / "sample-kv-cache-no-memory.yaml"
    with api_client(db) as client:
        incident = next(i for i in client.get("/incidents").json()["items"]
                        if i["slug"] == "sample-kv-cache-no-memory")
        iid = incident["id"]
        user_fix = client.post(f"/incidents/{iid}/fixes",
                               json={"title": "User fix", "kind": "workaround", "change": {"env": {"VLLM_USE_V1": "0"}}}).json()
        seeded = [f for f in client.get(f"/incidents/{iid}").json()["fixes"] if f["seeded"]]
        client.post(f"/fixes/{seeded[0]['id']}/outcomes", json={"worked": False, "note": "nope"})
        client.post(f"/fixes/{user_fix['id']}/outcomes", json={"worked": True})
        upload(client, vllm_log(seed=3))
        before = client.get(f"/incidents/{iid}").json()

        data = yaml.safe_load(path.read_text())
        data["title"] = "KV cache does not fit after profiling"
        data["fixes"][0]["description"] = "Edited description."
        data["fixes"] = data["fixes"][:1]  # the second seeded fix is dropped
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        report = seed_database(db, seeds)
        assert (report.updated, report.unchanged) == (1, 2)
        assert report.fixes_updated == 1 and report.fixes_removed == 1

        after = client.get(f"/incidents/{iid}").json()
        assert after["title"] == "KV cache does not fit after profiling"
        by_id = {f["id"]: f for f in after["fixes"]}
        assert by_id[seeded[0]["id"]]["description"] == "Edited description."
        assert by_id[seeded[0]["id"]]["failed"] == 1  # the user's outcome is kept
        assert by_id[user_fix["id"]]["title"] == "User fix" and by_id[user_fix["id"]]["worked"] == 1
        assert after["occurrence_count"] == before["occurrence_count"] == 1
        assert [o["id"] for o in after["occurrences"]] == [o["id"] for o in before["occurrences"]]


def test_user_edits_survive_reseeding_an_unchanged_seed(db, seeds):
    seed_database(db, seeds)
    with api_client(db) as client:
        iid = client.get("/incidents", params={"q": "nccl"}).json()["items"][0]["id"]
        client.patch(f"/incidents/{iid}", json={"title": "Our title", "notes": "ours"})
        seed_database(db, seeds)
        detail = client.get(f"/incidents/{iid}").json()
        assert (detail["title"], detail["notes"]) == ("Our title", "ours")


def test_an_uploaded_incident_is_absorbed_by_the_seed_that_describes_it(db, seeds):
    loaded, _ = read_seeds(seeds)
    kv = next(s for s in loaded if s.slug == "sample-kv-cache-no-memory")
    with api_client(db) as client:
        uploaded = upload(client, kv.examples[0][1]).json()["incident"]["id"]
        report = seed_database(db, seeds)
        assert report.merged == 1
        seeded = client.get("/incidents", params={"q": "kv-cache-no-memory"}).json()["items"][0]
        assert seeded["occurrences"] == 1
        assert client.get(f"/incidents/{uploaded}").json()["merged_into"]["id"] == seeded["id"]
        assert upload(client, kv.examples[0][1]).json()["incident"]["id"] == seeded["id"]


@pytest.mark.parametrize("content,message", [
    ("slug: Not_Kebab\ntitle: t\nengine: vllm\n", "kebab-case"),
    ("slug: a-b\nengine: vllm\n", "title"),
    ("slug: a-b\ntitle: t\nengine: llamacpp\n", "engine"),
    ("slug: a-b\ntitle: t\nengine: vllm\nphase: lunch\n", "phase"),
    ("slug: a-b\ntitle: t\nengine: vllm\nfixes:\n  - title: x\n    kind: magic\n", "kind"),
    ("slug: a-b\ntitle: t\nengine: vllm\nexamples:\n  - name: x\n", "log"),
    ("- just\n- a list\n", "mapping"),
    ("slug: [unclosed\n", "YAML"),
])
def test_invalid_seeds_are_reported_not_loaded(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(SeedError, match=message):
        parse_seed(path)
    loaded, errors = read_seeds(tmp_path)
    assert loaded == [] and len(errors) == 1 and "bad.yaml" in errors[0]


def test_upstream_outcome_counts_are_told_apart_from_the_teams_own(db):
    seed_database(db, SAMPLE_SEEDS)
    with api_client(db) as client:
        slugs = {i["slug"]: i["id"] for i in client.get("/incidents").json()["items"]}
        fix = client.get(f"/incidents/{slugs['sample-kv-cache-no-memory']}").json()["fixes"][0]
        assert (fix["upstream_worked"], fix["team_worked"], fix["worked"]) == (2, 0, 2)
        client.post(f"/fixes/{fix['id']}/outcomes", json={"worked": True})
        client.post(f"/fixes/{fix['id']}/outcomes", json={"worked": False})
        fix = client.get(f"/incidents/{slugs['sample-kv-cache-no-memory']}").json()["fixes"][0]
        assert (fix["upstream_worked"], fix["upstream_failed"]) == (2, 0)
        assert (fix["team_worked"], fix["team_failed"]) == (1, 1)
        assert (fix["worked"], fix["failed"]) == (3, 1)  # the totals other tools read
        page = client.get(f"/ui/incidents/{slugs['sample-kv-cache-no-memory']}").text
        assert "reported upstream:" in page and "this team:" in page
        text = client.get(f"/incidents/{slugs['sample-kv-cache-no-memory']}?format=text").text
        assert "     config · reported upstream: worked 2, failed 0; this team: worked 1, failed 1\n" in text
