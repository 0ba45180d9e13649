"""Benchmark of the team dashboard (a script, not a test): how long GET /dashboard's
service call takes on a knowledge base with many uploads.

  .venv/bin/python bench/bench_dashboard.py                                  # SQLite and Postgres
  .venv/bin/python bench/bench_dashboard.py --incidents 2000 --occurrences 200000 --days 90

Bulk-inserts synthetic incidents and occurrences (spread evenly over --days days, with
a handful of engine versions, GPUs and model architectures) straight into a fresh
database, then times kb.services.dashboard.dashboard in process: median and worst of
--rounds calls. Postgres: KB_BENCH_POSTGRES_URL, else KB_TEST_POSTGRES_URL, else
127.0.0.1:5432/test (a throwaway schema, dropped at the end).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert
from sqlalchemy.engine import make_url

from kb.db import migrate
from kb.db.models import Incident, Occurrence
from kb.db.session import Database
from kb.services.dashboard import dashboard

VERSIONS = ["0.9.2", "0.10.1", "0.10.2", "0.11.0", "0.11.1"]
GPUS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA B200", None]
ARCHS = ["llama", "qwen3", "kimi_k2", "deepseek_v3", None]


def fill(db: Database, incidents: int, occurrences: int, days: int) -> None:
    rng = random.Random(1)
    now = datetime.now(UTC)
    with db.engine.begin() as conn:
        conn.execute(insert(Incident), [
            {"id": n + 1, "title": f"Synthetic crash {n}", "engine": "vllm", "tags": [], "links": [],
             "model_archs": [], "gpu_families": [], "occurrence_count": 0, "recommended_path": "investigate",
             "seeded": False, "engine_limitation": False, "first_seen": now - timedelta(days=days),
             "created_at": now, "updated_at": now} for n in range(incidents)])
        batch = []
        for n in range(occurrences):
            batch.append({
                "incident_id": int(rng.paretovariate(1.2)) % incidents + 1, "match_status": "known",
                "analysis": {}, "log_compressed": b"", "log_bytes": 0, "log_lines": 0, "engine": "vllm",
                "engine_version": rng.choice(VERSIONS), "gpu_name": rng.choice(GPUS),
                "model_arch": rng.choice(ARCHS),
                "created_at": now - timedelta(seconds=rng.uniform(0, days * 86400))})
            if len(batch) == 10_000:
                conn.execute(insert(Occurrence), batch)
                batch = []
        if batch:
            conn.execute(insert(Occurrence), batch)


def run(label: str, url: str, args: argparse.Namespace) -> None:
    db = Database(url, pool_size=2)
    try:
        migrate.upgrade(db.engine)
        started = time.perf_counter()
        fill(db, args.incidents, args.occurrences, args.days)
        filled = time.perf_counter() - started
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            result = dashboard(db)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"{label}: {args.occurrences} occurrences over {args.days} days, {args.incidents} incidents "
              f"(filled in {filled:.1f} s); {result.occurrences_this_week} this week: dashboard "
              f"median {statistics.median(times):.0f} ms, worst {max(times):.0f} ms over {args.rounds} calls")
    finally:
        db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--incidents", type=int, default=1000)
    parser.add_argument("--occurrences", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run("sqlite", f"sqlite:///{tmp}/bench.sqlite3", args)
    if args.no_postgres:
        return
    import psycopg

    base = (os.environ.get("KB_BENCH_POSTGRES_URL") or os.environ.get("KB_TEST_POSTGRES_URL")
            or "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    libpq = make_url(base).set(drivername="postgresql").render_as_string(hide_password=False)
    schema = f"kb_bench_dash_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        run("postgres", url.render_as_string(hide_password=False), args)
    finally:
        with psycopg.connect(libpq, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
