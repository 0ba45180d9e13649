"""Shared helpers of the service tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from kb.config import Settings
from kb.web.app import create_app

SAMPLE_SEEDS = Path(__file__).parent / "seeds_sample"
# The service answers only loopback names by default (kb.web.crossorigin).
BASE_URL = "http://127.0.0.1"


@contextmanager
def api_client(db: Any, **settings: Any) -> Iterator[TestClient]:
    """A Litestar TestClient on the test's database."""
    base = Settings(database_url=db.url, seeds_dir=SAMPLE_SEEDS, seed=False)
    app = create_app(base.with_(**settings), db=db)
    with TestClient(app, base_url=BASE_URL, raise_server_exceptions=False) as client:
        yield client


def upload(client: TestClient, log: str | bytes, **fields: Any) -> Any:
    data = log.encode() if isinstance(log, str) else log
    return client.post("/incidents", files={"log": ("vllm.log", data, "text/plain")},
                       data={k: str(v) for k, v in fields.items()})
