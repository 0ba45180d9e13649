"""A fix entering the KB by the API, the UI or a seed file follows its kind's schema:
a bad record gets a 400 naming the field (kb seed: the file and the field), and nothing
of it is stored."""

from __future__ import annotations

import textwrap

import pytest

from kb.services.seeding import SeedError, parse_seed
from tests.service.helpers import api_client, upload
from tests.service.logs import vllm_log

GOOD = {"title": "Lower --max-model-len", "kind": "config",
        "change": {"flags": ["--max-model-len 32768"]}, "applies_to": {"engine_versions": ">=0.10"}}


@pytest.fixture
def client(db):
    with api_client(db) as c:
        yield c


@pytest.fixture
def incident(client):
    return upload(client, vllm_log()).json()["incident"]["id"]


@pytest.mark.parametrize(("body", "field"), [
    ({**GOOD, "applies_to": {"engine_versions": "> = 0.10 or so"}}, "applies_to.engine_versions"),
    ({**GOOD, "kind": "upgrade", "change": {"flags": ["--x"]}}, "change"),
    ({**GOOD, "kind": "switch_engine", "change": {"engine": "sglang", "engine_version": "soon"}},
     "change.engine_version"),
    ({**GOOD, "change": {"flags": ["vllm serve ..."]}}, "change.flags[0]"),
])
def test_the_api_refuses_a_bad_fix_naming_the_field_and_stores_nothing(client, incident, body, field):
    refused = client.post(f"/incidents/{incident}/fixes", json=body)
    assert refused.status_code == 400, refused.text
    answer = refused.json()
    assert answer["detail"].startswith(f"{field}: ")
    assert answer["extra"] == [{"key": field, "message": answer["detail"], "source": "body"}]
    assert client.get(f"/incidents/{incident}").json()["fixes"] == []


def test_an_unknown_kind_is_refused_by_the_schema_of_the_body(client, incident):
    refused = client.post(f"/incidents/{incident}/fixes", json={**GOOD, "kind": "prayer"})
    assert refused.status_code == 400 and refused.json()["extra"][0]["key"] == "kind"


def test_an_edit_is_checked_as_the_fix_it_leaves_and_changes_nothing_when_refused(client, incident):
    fix = client.post(f"/incidents/{incident}/fixes", json=GOOD).json()
    # the kind alone changes: an upgrade needs a version the config change does not hold
    refused = client.patch(f"/fixes/{fix['id']}", json={"kind": "upgrade", "title": "Upgrade"})
    assert refused.status_code == 400 and refused.json()["detail"].startswith("change: ")
    kept = client.get(f"/incidents/{incident}").json()["fixes"][0]
    assert (kept["kind"], kept["title"], kept["edited_at"]) == ("config", GOOD["title"], None)
    ok = client.patch(f"/fixes/{fix['id']}", json={"kind": "upgrade", "change": {"version": "0.11.0"}})
    assert ok.status_code == 200 and ok.json()["change"] == {"version": "0.11.0"}


def test_the_ui_refuses_with_the_same_words(client, incident):
    page = client.post(f"/ui/incidents/{incident}/fixes",
                       data={"title": "x", "kind": "upgrade", "change": "version=latest"})
    assert page.status_code == 400
    assert "change.version: &#39;latest&#39; is neither a version" in page.text
    assert client.get(f"/incidents/{incident}").json()["fixes"] == []


def test_kb_seed_names_the_file_and_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent("""\
        slug: bad-seed
        title: A seed with a bad fix
        engine: vllm
        affected_versions: ">=0.10"
        fixes:
          - title: Upgrade
            kind: upgrade
            change: {version: "the next one"}
        """))
    with pytest.raises(SeedError) as refused:
        parse_seed(path)
    assert str(refused.value) == (f"{path} (bad-seed): fixes[0].change.version: 'the next one' is "
                                  "neither a version ('0.11.0') nor a requirement with one "
                                  "('transformers>=4.51.0')")
    path.write_text(path.read_text().replace('">=0.10"', '"0.10 and later"'))
    with pytest.raises(SeedError, match=r"\(bad-seed\): affected_versions: '0.10 and later' is not"):
        parse_seed(path)


@pytest.mark.parametrize(("form", "words"), [
    ({"kind": "config", "change": "flags=--max-model-len 32768", "applies_versions": "> = 0.10 or so"},
     "applies_to.engine_versions: &#39;&gt; = 0.10 or so&#39; is not a PEP 440 version range"),
    ({"kind": "prayer", "change": "flags=--max-model-len 32768"}, "kind: &#39;prayer&#39; is not a fix kind"),
    ({"kind": "upgrade", "change": "flags=--max-model-len 32768"}, "change: a upgrade fix needs version"),
], ids=["bad-specifier", "unknown-kind", "missing-change-key"])
def test_the_ui_refuses_a_bad_specifier_an_unknown_kind_and_a_missing_change_key(client, incident, form, words):
    page = client.post(f"/ui/incidents/{incident}/fixes", data={"title": "Lower it", **form})
    assert page.status_code == 400
    assert words in page.text
    assert client.get(f"/incidents/{incident}").json()["fixes"] == []
