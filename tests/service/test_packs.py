"""Knowledge packs (kb export / kb import, GET /export, POST /import) on SQLite and
Postgres: a pack exported from one knowledge base and imported into an empty one
reproduces its incidents, fixes, outcomes and chains; a second import changes nothing; a
local edit is kept and reported unless overwritten; a bad pack is refused naming the file
and the field, and nothing is written."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kb.cli import main
from kb.db import migrate
from kb.db.models import Fix, FixOutcome, Incident
from kb.db.session import Database
from kb.services import packs
from kb.services.errors import InvalidInput
from kb.services.seeding import seed_database
from tests.service.helpers import SAMPLE_SEEDS, api_client, upload
from tests.service.logs import vllm_log

# a crash none of the sample seeds knows: uploading it creates an incident
EXPERTS = dict(exception="KeyError", message="'model.layers.61.mlp.experts.w13_weight_scale_inv'")


@pytest.fixture
def target(fresh_db_url: str) -> Iterator[Database]:
    """A second, empty knowledge base of the same backend."""
    database = Database(fresh_db_url, pool_size=2)
    migrate.upgrade(database.engine)
    try:
        yield database
    finally:
        database.dispose()


def _curate(db) -> dict:
    """A source KB: the sample seeds, an incident made by uploads with a fix, outcomes on it
    and on a seeded fix, and curated fields set through the API (a chain from the upload
    incident to a seeded one)."""
    seed_database(db, SAMPLE_SEEDS)
    with api_client(db) as client:
        first = upload(client, vllm_log(**EXPERTS), engine_version="0.10.1", gpu="NVIDIA A100-SXM4-80GB").json()
        incident_id = first["incident"]["id"]
        seeded = client.get("/incidents", params={"q": "KV cache"}).json()["items"][0]
        fix = client.post(f"/incidents/{incident_id}/fixes", json={
            "title": "Load the checkpoint with its FP8 scales", "kind": "config",
            "description": "Point at the FP8 checkpoint.\nThe BF16 one has no scales.",
            "change": {"flags": ["--quantization fp8"]},
            "applies_to": {"engine": "vllm", "engine_versions": ">=0.10,<0.12"},
            "author": "dana"}).json()
        for worked, note in ((True, "fixed it on node 3"), (False, "not on the IB cluster")):
            assert client.post(f"/fixes/{fix['id']}/outcomes", json={
                "worked": worked, "note": note, "engine": "vllm", "engine_version": "0.10.1",
                "gpu": "NVIDIA A100-SXM4-80GB", "reporter": "lee"}).status_code == 201
        seeded_detail = client.get(f"/incidents/{seeded['id']}").json()
        seeded_fix = seeded_detail["fixes"][0]["id"]
        assert client.post(f"/fixes/{seeded_fix}/outcomes", json={"worked": True}).status_code == 201
        response = client.patch(f"/incidents/{incident_id}", json={
            "notes": "seen on the new cluster only", "tags": ["nccl", "network"],
            "next": seeded["id"], "affected_versions": ">=0.10,<0.11", "fixed_in": "0.11.0",
            "engine_limitation": False})
        assert response.status_code == 200, response.text
    return {"upload_incident": incident_id, "seeded_incident": seeded["id"], "fix": fix["id"]}


def _snapshot(db: Database) -> dict:
    """What a pack carries, keyed by slug (ids differ between knowledge bases)."""
    with db.read() as s:
        incidents = {i.id: i for i in s.query(Incident).filter(Incident.merged_into_id.is_(None))}
        slugs = {i.id: i.slug for i in incidents.values()}
        out: dict = {}
        for i in incidents.values():
            out[i.slug] = {
                "title": i.title, "engine": i.engine, "affected_versions": i.affected_versions,
                "fixed_in": i.fixed_in, "model_archs": i.model_archs, "gpu_families": i.gpu_families,
                "phase": i.phase, "engine_limitation": i.engine_limitation, "summary": i.summary,
                "links": i.links, "tags": i.tags, "notes": i.notes,
                "next": slugs.get(i.next_incident_id), "recommended_path": i.recommended_path,
                "fixes": {}}
        for f in s.query(Fix):
            outcomes = sorted((o.worked, o.note, o.engine, o.engine_version, o.gpu, o.reporter,
                               o.created_at.isoformat())
                              for o in s.query(FixOutcome).filter(FixOutcome.fix_id == f.id))
            out[slugs[f.incident_id]]["fixes"][f.title] = {
                "kind": f.kind, "description": f.description, "change": f.change,
                "applies_to": f.applies_to, "worked": f.curated_worked, "failed": f.curated_failed,
                "author": f.author, "outcomes": outcomes}
    return out


def test_export_then_import_into_an_empty_kb_reproduces_it(db, target, tmp_path: Path):
    ids = _curate(db)
    files = packs.export_pack(db, None, SAMPLE_SEEDS)
    packs.write_pack(files, tmp_path / "pack")
    source = _snapshot(db)
    # the upload incident got a slug, named by the chain, with its example and its fix
    with db.read() as s:
        slug = s.get(Incident, ids["upload_incident"]).slug
        next_slug = s.get(Incident, ids["seeded_incident"]).slug
    assert slug and slug.startswith("vllm-")
    record = yaml.safe_load((tmp_path / "pack" / "vllm" / f"{slug}.yaml").read_text())
    assert record["next"] == next_slug and record["fixed_in"] == "0.11.0"
    assert record["examples"] and "w13_weight_scale_inv" in record["examples"][0]["log"]
    assert [o["note"] for o in record["fixes"][0]["outcomes"]] == ["fixed it on node 3", "not on the IB cluster"]

    report = packs.import_pack(target, packs.read_folder(tmp_path / "pack"))
    assert len(report.added) == len(source) == 4 and not report.conflicts, report.lines()
    assert report.outcomes_added == 3 and report.fingerprints_added >= 4
    assert _snapshot(target) == source

    # the imported fingerprints make the same crash known in the new knowledge base
    with api_client(target) as client:
        again = upload(client, vllm_log(**EXPERTS), engine_version="0.10.1").json()
        assert again["match"]["status"] == "known"
        assert again["incident"]["slug"] == slug
        detail = client.get(f"/incidents/{again['incident']['id']}").json()
        assert detail["next"]["title"] == source[next_slug]["title"]
        assert detail["fixes"][0]["team_worked"] == 1 and detail["fixes"][0]["team_failed"] == 1


def test_importing_twice_changes_nothing_the_second_time(db, target, tmp_path: Path):
    _curate(db)
    packs.write_pack(packs.export_pack(db, None, SAMPLE_SEEDS), tmp_path / "pack")
    first = packs.import_pack(target, packs.read_folder(tmp_path / "pack"))
    assert first.did_change
    before = _snapshot(target)
    second = packs.import_pack(target, packs.read_folder(tmp_path / "pack"))
    assert not second.did_change, second.lines()
    assert second.unchanged == second.files == 4 and not second.conflicts
    assert _snapshot(target) == before
    # the source's own pack, imported back into it, changes nothing either
    assert not packs.import_pack(db, packs.read_folder(tmp_path / "pack")).did_change


def test_a_local_edit_is_kept_and_reported_unless_overwritten(db, target, tmp_path: Path):
    ids = _curate(db)
    packs.write_pack(packs.export_pack(db, None, SAMPLE_SEEDS), tmp_path / "v1")
    packs.import_pack(target, packs.read_folder(tmp_path / "v1"))
    with db.read() as s:
        slug = s.get(Incident, ids["upload_incident"]).slug
    # the other team edits the incident's title and the fix here...
    with api_client(target) as client:
        with target.read() as s:
            here = {"id": s.query(Incident).filter(Incident.slug == slug).one().id}
        assert client.patch(f"/incidents/{here['id']}", json={"title": "Our own title", "next": 0}).status_code == 200
        fix_id = client.get(f"/incidents/{here['id']}").json()["fixes"][0]["id"]
        assert client.patch(f"/fixes/{fix_id}", json={"title": "Our own fix title"}).status_code == 200
    # ...while the source changes both, and adds an outcome
    with api_client(db) as client:
        client.patch(f"/incidents/{ids['upload_incident']}", json={"title": "Their new title"})
        client.patch(f"/fixes/{ids['fix']}", json={"title": "Their new fix title"})
        client.post(f"/fixes/{ids['fix']}/outcomes", json={"worked": True, "note": "third time"})
    packs.write_pack(packs.export_pack(db, None, SAMPLE_SEEDS), tmp_path / "v2")

    report = packs.import_pack(target, packs.read_folder(tmp_path / "v2"))
    assert {(c.slug, c.fix, tuple(c.fields), c.overwritten) for c in report.conflicts} == {
        (slug, None, ("title",), False), (slug, None, ("next",), False),
        (slug, f"{slug}#local-{ids['fix']}", ("title",), False)}
    assert report.outcomes_added == 1
    assert any(line.startswith(f"conflict {slug}: title") and "kept the local edit" in line
               for line in report.lines())
    with target.read() as s:
        incident = s.query(Incident).filter(Incident.slug == slug).one()
        assert incident.title == "Our own title" and incident.next_incident_id is None
        assert s.query(Fix).filter(Fix.incident_id == incident.id).one().title == "Our own fix title"

    forced = packs.import_pack(target, packs.read_folder(tmp_path / "v2"), overwrite=True)
    assert {c.overwritten for c in forced.conflicts} == {True} and len(forced.conflicts) == 2
    with target.read() as s:
        incident = s.query(Incident).filter(Incident.slug == slug).one()
        assert incident.title == "Their new title" and incident.edited_at is None
        assert incident.next_incident_id is not None  # the pack's chain is back
        assert s.query(Fix).filter(Fix.incident_id == incident.id).one().title == "Their new fix title"
    assert not packs.import_pack(target, packs.read_folder(tmp_path / "v2")).did_change


def _count(db: Database) -> tuple[int, int]:
    with db.read() as s:
        return s.query(Incident).count(), s.query(Fix).count()


@pytest.mark.parametrize(("edit", "field"), [
    (lambda r: r["fixes"][0]["change"].update(version="latest"), "fixes[0].change.version"),
    (lambda r: r.update(affected_versions="0.10 and up"), "affected_versions"),
    (lambda r: r["fixes"][0].update(outcomes=[{"worked": "yes"}]), "fixes[0].outcomes[0].worked"),
    (lambda r: r["fixes"][0].update(kind="upgrade"), "fixes[0].change"),
])
def test_a_bad_pack_is_refused_naming_file_and_field_and_nothing_is_written(db, target, tmp_path, edit, field):
    _curate(db)
    files = packs.export_pack(db, None, SAMPLE_SEEDS)
    upload_file = next(n for n, text in files if "local-" in text)
    record = yaml.safe_load(dict(files)[upload_file])
    edit(record)
    bad = [(name, packs.dump_record(record) if name == upload_file else text) for name, text in files]
    bad.sort(key=lambda item: item[0] == upload_file)  # the bad file last: the others are valid
    with pytest.raises(InvalidInput) as caught:
        packs.import_pack(target, [(n, t.encode()) for n, t in bad])
    assert upload_file in caught.value.detail and field in caught.value.detail
    assert caught.value.field == field
    assert _count(target) == (0, 0)


def test_kb_export_and_kb_import_commands(db, target, tmp_path: Path):
    _curate(db)
    runner = CliRunner()
    out = runner.invoke(main, ["export", str(tmp_path / "pack"), "--database-url", db.url])
    assert out.exit_code == 0, out.output
    assert "4 incident file(s) written" in out.output
    one = runner.invoke(main, ["export", str(tmp_path / "one"), "--incidents", "1", "--database-url", db.url])
    assert one.exit_code == 0 and len(list((tmp_path / "one").rglob("*.yaml"))) == 1
    missing = runner.invoke(main, ["export", str(tmp_path / "x"), "--incidents", "999", "--database-url", db.url])
    assert missing.exit_code != 0 and "#999" in missing.output
    imported = runner.invoke(main, ["import", str(tmp_path / "pack"), "--database-url", target.url])
    assert imported.exit_code == 0, imported.output
    assert "incidents 4 added" in imported.output and "added fix" in imported.output
    again = runner.invoke(main, ["import", str(tmp_path / "pack"), "--database-url", target.url])
    assert "incidents 0 added, 0 changed, 4 unchanged; fixes 0 added, 0 changed" in again.output
    # the same pack is a seed folder `kb seed --path` loads
    assert _count(target)[0] == 4


def test_export_and_import_over_the_api(db, target):
    _curate(db)
    with api_client(db, api_tokens=("admin-token",)) as client:
        assert client.get("/export").status_code == 401
        response = client.get("/export", headers={"Authorization": "Bearer admin-token"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/gzip")
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as tar:
        assert len([m for m in tar.getmembers() if m.name.endswith(".yaml")]) == 4
    with api_client(target) as client:
        answer = client.post("/import", content=response.content,
                             headers={"Content-Type": "application/gzip"})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["changed"] and len(body["report"]["added"]) == 4 and "4 added" in body["summary"]
        again = client.post("/import", files={"pack": ("pack.tar.gz", response.content, "application/gzip")})
        assert again.status_code == 200 and again.json()["changed"] is False
        # the same files as a zip: read alike, nothing new
        zipped = io.BytesIO()
        with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as tar, \
                zipfile.ZipFile(zipped, "w") as archive:
            for member in tar.getmembers():
                archive.writestr(member.name, tar.extractfile(member).read())
        as_zip = client.post("/import?overwrite=true", content=zipped.getvalue(),
                             headers={"Content-Type": "application/zip"})
        assert as_zip.status_code == 200 and as_zip.json()["report"]["unchanged"] == 4

        # a bad member: 400 naming the file and the field, nothing written
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            data = yaml.safe_dump({"slug": "x-bad", "title": "Bad", "engine": "vllm",
                                   "fixed_in": "soon"}).encode()
            info = tarfile.TarInfo("vllm/x-bad.yaml")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        bad = client.post("/import", content=buffer.getvalue(), headers={"Content-Type": "application/gzip"})
        assert bad.status_code == 400
        assert "vllm/x-bad.yaml" in bad.json()["detail"] and "fixed_in" in bad.json()["detail"]
        assert bad.json()["extra"][0]["key"] == "fixed_in"
        assert client.get("/incidents", params={"q": "Bad"}).json()["total"] == 0
        junk = client.post("/import", content=b"not a pack", headers={"Content-Type": "application/gzip"})
        assert junk.status_code == 400 and "tar.gz or zip" in junk.json()["detail"]
