"""Fuzz the running service's OpenAPI with Schemathesis (a script, not a test).

  .venv/bin/pip install -e '.[fuzz]'
  .venv/bin/python bench/fuzz_api.py --backend sqlite   --cases 10000
  .venv/bin/python bench/fuzz_api.py --backend postgres --cases 10000

Starts `kb serve` on a loopback port with a throwaway database (an SQLite file in a temp
dir, or a fresh schema on the local Postgres, dropped afterwards), loaded with the seed
knowledge base so ids and links lead somewhere, runs `schemathesis run --checks all`
against /schema/openapi.json with a case budget (examples per operation, and a time
limit), and prints how many cases were sent, how many got a 5xx, and every failed check.
Exit status 1 when a 5xx or a failed check was seen.

The checks are all of Schemathesis's, with the exceptions in bench/fuzz_api.toml (each
says why there)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

ROOT = Path(__file__).resolve().parents[1]
CONFIG = Path(__file__).with_suffix(".toml")
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
OPERATIONS = 12  # in the document; the budget is spread over them


@contextmanager
def database(backend: str, pg_url: str, tmp: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp / 'kb.sqlite3'}"
        return
    import psycopg
    from sqlalchemy.engine import make_url

    schema = f"kb_fuzz_{uuid.uuid4().hex[:8]}"
    libpq = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield make_url(pg_url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False)
    finally:
        with psycopg.connect(libpq, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def serve(url: str, port: int, log: Path) -> Iterator[str]:
    env = {**os.environ, "KB_DATABASE_URL": url, "KB_LOG_LEVEL": "warning"}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kb.cli", "serve", "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(240):
                if proc.poll() is not None:
                    raise SystemExit(f"kb serve exited: {log.read_text()[-2000:]}")
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def tally(ndjson: Path) -> tuple[int, list[tuple[int, str, str]], Counter[str]]:
    """Cases sent, the 5xx answers (status, operation, body), failed checks by name."""
    cases = 0
    server_errors: list[tuple[int, str, str]] = []
    failed: Counter[str] = Counter()
    for line in ndjson.read_text().splitlines():
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        recorder = finished["recorder"]
        for interaction in recorder.get("interactions", {}).values():
            response = interaction.get("response")
            if response is None:
                continue
            cases += 1
            if response["status_code"] >= 500:
                content = response.get("content") or {}
                body = base64.b64decode(content.get("$base64", "")).decode("utf-8", "replace") \
                    if "$base64" in content else str(content)
                request = interaction["request"]
                server_errors.append((response["status_code"], f"{request['method']} {request['uri']}",
                                      body[:300]))
        for checks in recorder.get("checks", {}).values():
            for check in checks:
                if check["status"] == "failure":
                    failed[check["name"]] += 1
    return cases, server_errors, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres-url", default=os.environ.get("KB_TEST_POSTGRES_URL", DEFAULT_PG))
    parser.add_argument("--cases", type=int, default=10_000,
                        help="case budget: generated examples, spread over the operations")
    parser.add_argument("--max-time", type=int, default=1500, help="seconds, at most")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="copy the NDJSON report here")
    args = parser.parse_args()

    port = args.port or 8900 + os.getpid() % 90
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with database(args.backend, args.postgres_url, tmp) as url, serve(url, port, tmp / "serve.log") as base:
            command = [str(Path(sys.executable).with_name("schemathesis")),
                       "--config-file", str(CONFIG), "run", f"{base}/schema/openapi.json",
                       "--checks", "all", "--max-examples", str(max(1, args.cases // OPERATIONS)),
                       "--max-time", str(args.max_time), "--workers", str(args.workers),
                       "--no-shrink", "--request-timeout", "60", "--report", "ndjson",
                       "--report-ndjson-path", str(tmp / "run.ndjson")]
            if args.seed is not None:
                command += ["--seed", str(args.seed)]
            print("$", " ".join(command), flush=True)
            started = time.monotonic()
            run = subprocess.run(command, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            elapsed = time.monotonic() - started
            output = run.stdout
            ndjson = tmp / "run.ndjson"
            if args.keep and ndjson.exists():
                args.keep.write_bytes(ndjson.read_bytes())
            server_log = (tmp / "serve.log").read_text(errors="replace")
        if not ndjson.exists():
            print(output[-5000:])
            raise SystemExit("schemathesis wrote no report")
        cases, server_errors, failed = tally(ndjson)
    summary = output[output.rfind("=== SUMMARY"):] if "=== SUMMARY" in output else output[-3000:]
    print(summary.rstrip())
    if failed:
        print(output[:output.rfind("=== SUMMARY")][-20000:])
    tracebacks = server_log.count("Traceback")
    print(f"\n{args.backend}: {cases} cases in {elapsed:.0f} s, {len(server_errors)} answered 5xx, "
          f"failed checks: {dict(failed) or 'none'}, server tracebacks: {tracebacks}")
    for status, where, body in server_errors[:20]:
        print(f"  {status} {where}: {body}")
    if tracebacks:
        print(server_log[-5000:])
    sys.exit(1 if server_errors or failed or tracebacks else 0)


if __name__ == "__main__":
    main()
