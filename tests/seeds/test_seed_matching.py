"""Every example log of the shipped seeds, uploaded to a freshly seeded service, matches
its own incident (not another one) and gets the recommendation path its seed declares.
On SQLite and Postgres.

Two seeds whose examples the analyzer reduces to one exact route (fingerprint and engine)
cannot both be matched (the seeding reports "it cannot match both"): that is a bug in the
seeds or in identity, and the collision test names the incidents."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from litestar.testing import TestClient

from kb.config import Settings
from kb.services.seeding import fingerprint_examples, read_seeds, seed_database
from kb.web.app import create_app
from tests.service.helpers import BASE_URL

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


def _load_examples() -> list[tuple[str, str, str, str]]:
    """(slug, example name, log, declared recommendation) of every seed example."""
    out = []
    for path in sorted(SEEDS.glob("*/*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for example in data["examples"]:
            out.append((data["slug"], example["name"], example["log"], data["recommendation"]))
    return out


EXAMPLES = _load_examples()


def _collisions() -> dict[tuple[str, str], list[str]]:
    """Examples whose exact route (the fingerprint plus the engine, as the service routes
    an upload) is also an example's of another incident. One error on two engines is two
    incidents, each with its engine's fixes; one route on two incidents is a bug."""
    owners: dict[str, set[str]] = defaultdict(set)
    prints = {}
    for seed in read_seeds(SEEDS)[0]:
        for example in fingerprint_examples(seed):
            prints[(seed.slug, example.name)] = example.route_key
            owners[example.route_key].add(seed.slug)
    return {key: sorted(owners[route] - {key[0]}) for key, route in prints.items()
            if len(owners[route]) > 1}


COLLISIONS = _collisions()


def _cases() -> list[Any]:
    return [pytest.param(slug, name, log, recommendation, id=f"{slug}:{name}")
            for slug, name, log, recommendation in EXAMPLES]


@pytest.fixture(scope="module")
def service(migrated_db: Any) -> Iterator[tuple[TestClient, dict[int, str]]]:
    """A service on a fresh database (one per module and backend) loaded with the seeds."""
    report = seed_database(migrated_db, SEEDS)
    assert report.errors == []
    assert report.added == len({slug for slug, *_ in EXAMPLES})
    settings = Settings(database_url=migrated_db.url, seeds_dir=SEEDS, seed=False)
    app = create_app(settings, db=migrated_db)
    with TestClient(app, base_url=BASE_URL, raise_server_exceptions=False) as client:
        slugs: dict[int, str] = {}
        page = 1
        while True:
            body = client.get("/incidents", params={"page": page, "per_page": 200}).json()
            slugs.update({item["id"]: item["slug"] for item in body["items"]})
            if not body["items"] or len(slugs) >= body["total"]:
                break
            page += 1
        yield client, slugs


@pytest.mark.parametrize("slug,name,log,recommendation", _cases())
def test_example_matches_its_own_incident_and_path(service, slug, name, log, recommendation):
    client, slugs = service
    response = client.post("/incidents", files={"log": (f"{name}.log", log.encode("utf-8"),
                                                        "text/plain")})
    assert response.status_code in (200, 201), response.text
    body = response.json()
    matched = slugs.get(body["match"].get("incident_id"))
    assert (body["match"]["status"], matched) == ("known", slug), \
        f"{slug}:{name} matched {matched!r} ({body['match'].get('explanation')})"
    assert body["recommendation"]["path"] == recommendation, \
        f"{slug}:{name}: {body['recommendation']}"


def test_no_two_incidents_share_an_example_fingerprint():
    assert COLLISIONS == {}, "; ".join(sorted({" = ".join(sorted({s, *o}))
                                               for (s, _), o in COLLISIONS.items()}))
