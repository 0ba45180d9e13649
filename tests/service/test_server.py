"""End to end: a real `kb serve` process (2 workers) on SQLite and on Postgres, driven
with httpx like a user with curl would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx

from kb.services.seeding import read_seeds
from tests.conftest import child_pids, free_port, kb_serve_process
from tests.service.helpers import SAMPLE_SEEDS
from tests.service.logs import vllm_log

ROOT = Path(__file__).resolve().parents[2]
LOADER_FRAMES = [
    ("vllm/model_executor/models/deepseek_v2.py", 1020, "load_weights", "param = params_dict[name]"),
]


@contextmanager
def kb_serve(database_url: str, tmp_path: Path, *, workers: int = 1,
             **env: str) -> Iterator[str]:
    environ = {**os.environ, "KB_DATABASE_URL": database_url, "KB_SEEDS_DIR": str(SAMPLE_SEEDS),
               "KB_LOG_LEVEL": "warning", **env}
    with kb_serve_process(environ, tmp_path / f"serve-{workers}.log", "--workers", str(workers)) as base:
        yield base


def test_serve_seeds_an_empty_database_and_answers_uploads(fresh_db_url, tmp_path):
    seeds, _ = read_seeds(SAMPLE_SEEDS)
    with kb_serve(fresh_db_url, tmp_path, workers=2) as base, httpx.Client(base_url=base, timeout=30) as http:
        listing = http.get("/incidents").json()
        assert listing["total"] == len(seeds)
        kv = next(s for s in seeds if s.slug == "sample-kv-cache-no-memory")
        # curl -F log=@vllm.log http://127.0.0.1:8000/incidents
        known = http.post("/incidents", files={"log": ("vllm.log", kv.examples[0][1].encode())})
        assert known.status_code == 200, known.text
        body = known.json()
        assert body["match"]["status"] == "known"
        assert body["recommendation"]["path"] == "patch"
        assert body["fixes"] and body["incident"]["url"].startswith(base)

        # 8 concurrent clients uploading one new crash across 2 processes: one incident
        logs = [vllm_log("KeyError", "'model.layers.61.mlp.experts.w2_weight_scale_inv'", seed=n,
                         frames=LOADER_FRAMES).encode() for n in range(16)]

        def send(data: bytes) -> httpx.Response:
            with httpx.Client(base_url=base, timeout=60) as client:
                return client.post("/incidents", files={"log": ("vllm.log", data)})

        with ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(send, logs))
        assert all(r.status_code in (200, 201) for r in responses), [r.text for r in responses]
        ids = {r.json()["incident"]["id"] for r in responses}
        assert len(ids) == 1
        assert sum(r.status_code == 201 for r in responses) == 1
        assert http.get(f"/incidents/{ids.pop()}").json()["occurrence_count"] == 16

        assert http.post("/incidents", content=b"", headers={"Content-Type": "text/plain"}).status_code == 400
        assert http.post("/incidents", content=b"\x00" * 100,
                         headers={"Content-Type": "application/octet-stream"}).status_code == 422
        assert http.get("/schema/openapi.json").status_code == 200

    # a restart on the same database does not seed again
    with kb_serve(fresh_db_url, tmp_path) as base:
        assert httpx.get(f"{base}/incidents").json()["total"] == len(seeds) + 1


def test_kb_seed_0_starts_empty(fresh_db_url, tmp_path):
    with kb_serve(fresh_db_url, tmp_path, KB_SEED="0") as base:
        assert httpx.get(f"{base}/incidents").json()["total"] == 0


def test_serve_reports_an_unreachable_database(tmp_path):
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x?connect_timeout=1"
    result = subprocess.run([sys.executable, "-m", "kb.cli", "serve", "--port", str(free_port())],
                            cwd=ROOT, env={**os.environ, "KB_DATABASE_URL": url},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "database unavailable" in result.stderr
    assert "Traceback" not in result.stderr



def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_die_with_a_killed_supervisor_and_the_port_is_free_again(tmp_path):
    """kill -9 of `kb serve --workers 2`: its workers stop within seconds instead of
    serving on as orphans, and a new `kb serve` on the same port starts."""
    import time

    port = free_port()
    env = {**os.environ, "KB_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.db'}", "KB_SEED": "0",
           "KB_LOG_LEVEL": "warning"}
    with (tmp_path / "serve.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kb.cli", "serve", "--host", "127.0.0.1", "--port",
                                 str(port), "--workers", "2"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "serve.log").read_text()
                time.sleep(0.3)
            workers = [p for p in child_pids(proc.pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
            assert len(workers) == 2, workers
            proc.kill()
            proc.wait()
            deadline = time.monotonic() + 15
            while any(_alive(p) for p in workers):
                assert time.monotonic() < deadline, "workers still serve after their supervisor died"
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                proc.kill()
    with kb_serve_process(env, tmp_path / "again.log", port=port) as base:
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
