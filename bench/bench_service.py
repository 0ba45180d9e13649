"""Benchmark of the Crash KB service on Postgres (a script, not a test).

  .venv/bin/python bench/bench_service.py                      # everything, defaults below
  .venv/bin/python bench/bench_service.py --uploads 300 --rounds 3 --workers 1,2 --match-sizes 10000,100000

1. Uploads: starts `kb serve --workers N` on a fresh Postgres schema (N = 1 and 2, side
   by side), uploads realistic ~1 MB multi-process vLLM logs (a long interleaved start-up,
   then a worker traceback and the engine's wrapper errors; 48 logs of 24 known crash
   types and a few new crashes) from 8 concurrent clients, and reports uploads/s and
   p50/p99 latency: the median of 3 timed rounds, and the range. The rounds are
   consecutive stretches of one continuous stream (the clients never stop in between,
   so no round starts with all of them uploading at the same instant). An untimed
   warm-up stores each crash once and gives every worker its connections, so the timed
   uploads are what a team sends most: crashes seen before, each analysed, matched and
   stored as an occurrence. Each client uploads like `curl -F log=@vllm.log`: a
   multipart body, one connection per upload. The bodies are encoded once and sent with
   the standard library's HTTP client, so the load generator takes little of the 2
   cores it shares with the service and Postgres.
2. Matching: bulk-inserts synthetic incidents (10k, then 100k) straight into the tables
   and times the service's match (exact fingerprint lookup, or indexed candidate loading
   + scoring) in process: p50/p99.
3. Where the time of one upload goes (in process): analysis, redaction, compression.

Targets (2 cores): >= 100 uploads/s and p99 <= 100 ms; match p99 <= 20 ms at 100k.
Postgres: KB_BENCH_POSTGRES_URL, else KB_TEST_POSTGRES_URL, else 127.0.0.1:5432/test.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kb.core.records import CrashFeatures  # noqa: E402
from kb.db.session import Database  # noqa: E402
from tests.conftest import kb_serve_process  # noqa: E402
from tests.service.logs import big_vllm_log  # noqa: E402

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

CRASHES = [
    ("ValueError", "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."),
    ("ValueError", "The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache (52416). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."),
    ("ValueError", "Total number of attention heads (40) must be divisible by tensor parallel size (6)."),
    ("ValueError", "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100-SXM2-32GB GPU has compute capability 7.0."),
    ("ValueError", "Model architectures ['Qwen3NextForCausalLM'] are not supported for now."),
    ("ValueError", "DP adjusted local rank 4 is out of bounds."),
    ("ValueError", "EAGLE3 is only supported for models ['llama', 'qwen', 'minicpm', 'gpt_oss'] but got model_type='kimi_k2'"),
    ("AttributeError", "'KimiK25Config' object has no attribute 'image_token_index'"),
    ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 1.76 GiB. GPU 3 has a total capacity of 79.19 GiB of which 1.02 GiB is free."),
    ("RuntimeError", "CUDA error: no kernel image is available for execution on the device"),
    ("RuntimeError", "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method"),
    ("torch.distributed.DistBackendError", "NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error, NCCL version 2.21.5"),
    ("RuntimeError", "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"),
    ("ValueError", "The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. Current capability: 80."),
    ("ValueError", "Current node has no GPU available. current_node_resource={'CPU': 64.0}. vLLM engine cannot start without GPU."),
    ("jinja2.exceptions.TemplateError", "Conversation roles must alternate user/assistant/user/assistant/..."),
    ("OSError", "We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files."),
    ("KeyError", "'model.layers.61.mlp.experts.w2_weight_scale_inv'"),
    ("AssertionError", "Attempted to load weight (torch.Size([7168, 2048])) into parameter (torch.Size([7168, 1024]))"),
    ("RuntimeError", "Triton Error [CUDA]: an illegal memory access was encountered"),
    ("NotImplementedError", "No operator found for `memory_efficient_attention_forward` with inputs"),
    ("ValueError", "Free memory on device (38.2/79.1 GiB) on startup is less than desired GPU memory utilization (0.9, 71.2 GiB)."),
    ("RuntimeError", "Worker failed with error 'CUDA error: an illegal instruction was encountered', please check the stack trace above for the root cause"),
    ("TypeError", "FlashAttentionImpl.__init__() got an unexpected keyword argument 'sinks'"),
]
FRAMES = [
    [("vllm/v1/worker/gpu_worker.py", 213, "load_model", "self.model_runner.load_model()"),
     ("vllm/v1/worker/gpu_model_runner.py", 2012, "load_model", "self.model = model_loader.load_model(")],
    [("vllm/v1/worker/gpu_worker.py", 268, "determine_available_memory", "self.model_runner.profile_run()"),
     ("vllm/v1/worker/gpu_model_runner.py", 2871, "profile_run", "hidden_states = self._dummy_run(")],
    [("vllm/config/__init__.py", 1122, "verify_with_parallel_config", "raise ValueError("),
     ("vllm/engine/arg_utils.py", 1390, "create_engine_config", "config = VllmConfig(")],
    [("vllm/v1/worker/gpu_model_runner.py", 2345, "capture_model", "self._dummy_run("),
     ("vllm/distributed/parallel_state.py", 480, "all_reduce", "return self.device_communicator.all_reduce(input_)")],
]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# ---- Postgres schemas --------------------------------------------------------------------


def libpq(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def fresh_schema(base: str):
    import psycopg
    from sqlalchemy.engine import make_url

    schema = f"kb_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq(base), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield make_url(base).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False)
    finally:
        with psycopg.connect(libpq(base), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# ---- 1. uploads through a real server --------------------------------------------------------


def make_logs(count: int, size: int, seed: int) -> list[tuple[str, bytes]]:
    """(kind, ~size-byte log): 90% of the 24 known crash types, 10% a brand-new crash."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        if rng.random() < 0.10:
            exc = rng.choice(["RuntimeError", "ValueError", "KeyError", "OSError"])
            msg = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 10))) + f" {uuid.uuid4().hex[:8]}"
            kind = "new"
        else:
            exc, msg = CRASHES[n % len(CRASHES)]
            kind = "known"
        text = big_vllm_log(size, exception=exc, message=msg, frames=FRAMES[n % len(FRAMES)],
                            seed=rng.randrange(1 << 30), tp=rng.choice([2, 4, 8]))
        out.append((kind, text.encode()))
    return out


class WebhookReceiver:
    """`--webhook local`: a webhook receiver on 127.0.0.1 in this process, counting what
    the service's notifications deliver (answers 200 at once)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        receiver = self
        self.events: dict[str, int] = {}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                self.rfile.read(int(self.headers.get("content-length") or 0))
                event = self.headers.get("X-KB-Event") or "?"
                receiver.events[event] = receiver.events.get(event, 0) + 1
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def serve(url: str, workers: int, webhook: str | None = None):
    """`kb serve --workers N` on `url`, started as the end-to-end tests start it (with
    `webhook`: KB_WEBHOOKS, so new incidents and spikes are notified)."""
    env = {**os.environ, "KB_DATABASE_URL": url, "KB_SEED": "0", "KB_LOG_LEVEL": "warning"}
    if webhook:
        env["KB_WEBHOOKS"] = webhook
    with tempfile.TemporaryDirectory() as tmp, kb_serve_process(
            env, Path(tmp) / "serve.log", "--workers", str(workers)) as base:
        yield base


def multipart_bodies(logs: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """(Content-Type, body) of `curl -F log=@vllm.log` for each log, encoded once: the
    load generator shares the 2 cores with the service and must cost it little."""
    out = []
    for _, data in logs:
        request = httpx.Request("POST", "http://kb/incidents", files={"log": ("vllm.log", data)})
        out.append((request.headers["content-type"], request.read()))
    return out


def post_upload(base: str, content_type: str, body: bytes) -> int:
    """One upload on a new connection, as `curl -F` or `kb submit` makes it: the standard
    library's HTTP client, whose cost per request is a few system calls."""
    url = httpx.URL(base)
    connection = http.client.HTTPConnection(url.host, url.port, timeout=120)
    try:
        connection.request("POST", "/incidents", body=body,
                           headers={"Content-Type": content_type})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def upload_stream(base: str, bodies: list[tuple[str, bytes]], uploads: int,
                  clients: int) -> list[tuple[float, float, int]]:
    """`uploads` uploads from `clients` threads, each uploading again as soon as its last
    upload is answered: (start, end, status) of each, in the order they ended."""
    records: list[tuple[float, float, int]] = []
    lock = threading.Lock()
    counter = iter(range(uploads))

    def client() -> None:
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            content_type, body = bodies[n % len(bodies)]
            start = time.perf_counter()
            status = post_upload(base, content_type, body)
            end = time.perf_counter()
            with lock:
                records.append((start, end, status))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(records, key=lambda record: record[1])


def run_uploads(base: str, logs: list[tuple[str, bytes]], uploads: int, clients: int,
                rounds: int) -> list[dict]:
    """`rounds` timed rounds of `uploads` uploads each: consecutive stretches of one
    continuous stream, after an untimed warm-up and before an untimed cool-down. The
    clients never stop between rounds: stopping and restarting them together would send
    `clients` uploads at the same instant at every round start, a burst that independent
    clients do not make, and the first uploads of each round would pay for it."""
    bodies = multipart_bodies(logs)
    # Warm-up, not timed: every known crash type once (creates the incidents), then the
    # stream's first uploads, so every worker process has its threads, database
    # connections and caches (the steady state is what the targets are about).
    for content_type, body in bodies[: len(CRASHES)]:
        assert post_upload(base, content_type, body) in (200, 201)
    warm, cool = 8 * clients, 2 * clients  # the cool-down: the stream ends with fewer in flight
    records = upload_stream(base, bodies, warm + rounds * uploads + cool, clients)
    results = []
    for k in range(rounds):
        timed = records[warm + k * uploads: warm + (k + 1) * uploads]
        since = records[warm + k * uploads - 1][1]  # the end of the upload before the round
        latencies = [end - start for start, end, _ in timed]
        statuses: dict[int, int] = {}
        for _, _, status in timed:
            statuses[status] = statuses.get(status, 0) + 1
        results.append({"per_s": len(timed) / (timed[-1][1] - since),
                        "p50_ms": 1000 * pct(latencies, 50), "p99_ms": 1000 * pct(latencies, 99),
                        "statuses": statuses})
    return results


# ---- 2. matching at 10k / 100k stored incidents -------------------------------------------

WORDS = ("cuda memory tensor rank worker engine cache block kernel device graph capture nccl "
         "model weight shard layer expert attention head parallel process group timeout "
         "allocate config token sampler scheduler request batch stream queue").split()
EXCEPTIONS = [f"{name}Error" for name in (
    "Value Runtime Key Attribute Type Index Assertion OS Import NotImplemented Memory Timeout "
    "Connection Permission FileNotFound Recursion Overflow ZeroDivision Lookup Name Unbound "
    "Syntax Unicode Module EOF Broken Reference System Environment").split()] + [
    "torch.OutOfMemoryError", "torch.distributed.DistBackendError", "ray.exceptions.RayTaskError"]
ENGINES = ["vllm", "vllm", "vllm", "sglang", "tensorrt-llm", "pytorch"]
PHASES = ["startup", "weight_loading", "kv_cache_profiling", "cuda_graph_capture", "serving", "config"]


def synthetic_rows(start: int, count: int, rng: random.Random) -> tuple[list[tuple], list[tuple]]:
    from kb.core.records import Fingerprint
    from kb.core.recall import message_key
    from kb.services.matching import route_key

    incidents, fingerprints = [], []
    for n in range(start, start + count):
        exc = rng.choice(EXCEPTIONS)
        msg = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + f" <n> id{n}"
        frames = [f"vllm/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py:{rng.choice(WORDS)}" for _ in range(4)]
        engine, phase = rng.choice(ENGINES), rng.choice(PHASES)
        h = uuid.UUID(int=rng.getrandbits(128)).hex
        incidents.append((n, f"{exc}: {msg[:120]}", engine, phase, h, "1", f"{exc}: {msg}", exc[:300]))
        key = route_key(Fingerprint(version="1", hash=h, signature="", exception=exc,
                                    message_template=msg),
                        CrashFeatures(exc, msg, engine=engine, phase=phase))
        fingerprints.append((n, n, "1", h, key, "upload", exc, message_key(msg), msg,
                             "[" + ",".join(f'"{f}"' for f in frames) + "]", engine,
                             f"0.{rng.randint(5, 12)}.{rng.randint(0, 3)}",
                             rng.choice(["llama", "qwen2", "deepseek_v3", "kimi_k2", None]),
                             rng.choice(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", None]),
                             rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4, 8]), 1, 1, None, phase))
    return incidents, fingerprints


def bulk_insert(url: str, start: int, count: int, rng: random.Random) -> None:
    import psycopg

    incidents, fingerprints = synthetic_rows(start, count, rng)
    with psycopg.connect(libpq(url)) as conn, conn.cursor() as cur:
        with cur.copy("COPY incidents (id, title, engine, phase, fingerprint_hash, fingerprint_version, "
                      "signature, exception, tags, links, model_archs, gpu_families, "
                      "engine_limitation, recommended_path, seeded, occurrence_count, created_at, "
                      "updated_at, first_seen, last_seen) FROM STDIN") as copy:
            for row in incidents:
                copy.write_row((*row, "[]", "[]", "[]", "[]", False, "investigate", False, 1,
                                "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z",
                                "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"))
        with cur.copy("COPY incident_fingerprints (id, incident_id, version, hash, route_key, source, exception, "
                      "message_key, message_template, frames, engine, engine_version, model_arch, "
                      "gpu_name, gpu_count, tp, dp, pp, ep, phase, created_at) FROM STDIN") as copy:
            for row in fingerprints:
                copy.write_row((*row, "2026-01-01T00:00:00Z"))
        # the document frequencies matching weighs terms by (kb.db.models.TemplateTerm)
        from collections import Counter

        from kb.core.recall import terms

        counts: Counter[str] = Counter()
        for row in fingerprints:
            counts[""] += 1
            counts.update(t[:120] for t in terms(row[8]))
        cur.execute("CREATE TEMP TABLE new_terms (term varchar(120), templates integer)")
        with cur.copy("COPY new_terms (term, templates) FROM STDIN") as copy:
            for term, n in counts.items():
                copy.write_row((term, n))
        cur.execute("INSERT INTO template_terms (term, templates) SELECT term, templates FROM new_terms "
                    "ON CONFLICT (term) DO UPDATE SET templates = template_terms.templates + excluded.templates")
        cur.execute("DROP TABLE new_terms")
        for table in ("incidents", "incident_fingerprints"):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        cur.execute("ANALYZE incidents; ANALYZE incident_fingerprints")
        conn.commit()


def time_matches(db: Database, url: str, total: int, queries: int, rng: random.Random,
                 candidate_limit: int) -> dict:
    import psycopg

    from kb.core.records import Fingerprint
    from kb.db.repositories import Repository
    from kb.services.matching import find_match

    with psycopg.connect(libpq(url)) as conn:
        sample = conn.execute(
            "SELECT hash, exception, message_template, frames, engine, engine_version, model_arch, "
            "gpu_name, gpu_count, tp, dp, pp, ep, phase FROM incident_fingerprints "
            "ORDER BY random() LIMIT %s", (queries + 10,)).fetchall()
    latencies = {"exact": [], "fuzzy": []}
    statuses: dict[str, int] = {}
    warmup = 10  # first queries warm the pool, the caches and psycopg's prepared statements
    for n, row in enumerate(sample):
        h, exc, msg, frames, *ctx = row
        exact = n % 2 == 0
        if not exact:  # a variant of a stored crash: new numbers, one word changed
            words = msg.split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            msg = " ".join(words)
            h = uuid.uuid4().hex
        features = CrashFeatures(exc, msg, list(frames), *ctx)
        fp = Fingerprint(version="1", hash=h, signature="", exception=exc, message_template=msg)
        start = time.perf_counter()
        with db.read() as session:
            outcome = find_match(Repository(session), fp, features, candidate_limit)
        if n < warmup:
            continue
        latencies["exact" if exact else "fuzzy"].append(time.perf_counter() - start)
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
    every = latencies["exact"] + latencies["fuzzy"]
    return {"stored": total, "queries": len(every), "p50_ms": 1000 * pct(every, 50),
            "p99_ms": 1000 * pct(every, 99), "exact_p99_ms": 1000 * pct(latencies["exact"], 99),
            "fuzzy_p99_ms": 1000 * pct(latencies["fuzzy"], 99), "statuses": statuses}


# ---- 3. where one upload's time goes ----------------------------------------------------------


def breakdown(data: bytes, rounds: int = 5) -> dict:
    """Median ms of the CPU-bound steps of one upload, as ingest_upload runs them."""
    from kb.core.analyze import analyze_for_storage
    from kb.db.logcodec import compress_log
    from kb.services.ingest import prepare_log

    parts: dict[str, list[float]] = {"prepare": [], "analyze+redact": [], "compress": []}
    for _ in range(rounds):
        t0 = time.perf_counter()
        prepared = prepare_log(data, 1 << 30)
        t1 = time.perf_counter()
        _, stored, _ = analyze_for_storage(prepared)
        t2 = time.perf_counter()
        compress_log(stored)
        t3 = time.perf_counter()
        parts["prepare"].append(t1 - t0)
        parts["analyze+redact"].append(t2 - t1)
        parts["compress"].append(t3 - t2)
    return {k: 1000 * statistics.median(v) for k, v in parts.items()}


def in_process_ingest(url: str, logs: list[tuple[str, bytes]], uploads: int, threads: int) -> dict:
    """ingest_upload from `threads` threads in this process, no HTTP: what the service
    costs without the web server, to tell the two apart."""
    from kb.db import migrate
    from kb.services import ingest

    db = Database(url, pool_size=threads)
    migrate.upgrade(db.engine)
    try:
        for _, data in logs[: len(CRASHES)]:
            ingest.ingest_upload(db, data, ingest.Overrides())
        latencies: list[float] = []
        lock = threading.Lock()
        counter = iter(range(uploads))

        def worker() -> None:
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return
                start = time.perf_counter()
                ingest.ingest_upload(db, logs[n % len(logs)][1], ingest.Overrides())
                with lock:
                    latencies.append(time.perf_counter() - start)

        pool = [threading.Thread(target=worker) for _ in range(threads)]
        start = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        wall = time.perf_counter() - start
    finally:
        db.dispose()
    return {"per_s": len(latencies) / wall, "p50_ms": 1000 * pct(latencies, 50),
            "p99_ms": 1000 * pct(latencies, 99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres-url", default=os.environ.get("KB_BENCH_POSTGRES_URL")
                        or os.environ.get("KB_TEST_POSTGRES_URL") or DEFAULT_PG)
    parser.add_argument("--uploads", type=int, default=300, help="uploads per timed round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed rounds per worker count (a shared VM's speed drifts)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--log-bytes", type=int, default=1_000_000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--match-sizes", default="10000,100000")
    parser.add_argument("--match-queries", type=int, default=400)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--skip-uploads", action="store_true")
    parser.add_argument("--skip-match", action="store_true")
    parser.add_argument("--skip-in-process", action="store_true")
    parser.add_argument("--webhook", default=None,
                        help="serve with notifications to this KB_WEBHOOKS value; `local`: a "
                             "receiver on 127.0.0.1 in this process, whose counts are printed")
    args = parser.parse_args()
    receiver = WebhookReceiver() if args.webhook == "local" else None
    webhook = receiver.url if receiver else args.webhook
    rng = random.Random(42)

    print(f"Crash KB service benchmark on {os.cpu_count()} CPU(s), Postgres "
          f"{args.postgres_url.split('@')[-1]}", flush=True)
    logs = make_logs(48, args.log_bytes, seed=1)
    mean_kb = statistics.mean(len(d) for _, d in logs) / 1024
    print(f"\n[breakdown] one {mean_kb:.0f} KiB upload, in process (median ms): "
          + ", ".join(f"{k} {v:.1f}" for k, v in breakdown(logs[0][1]).items()), flush=True)

    if not args.skip_uploads:
        print(f"\n[uploads] {args.rounds} rounds of {args.uploads} uploads of {mean_kb:.0f} KiB "
              f"vLLM logs, {args.clients} concurrent clients (targets: >= 100/s, p99 <= 100 ms); "
              f"the median round by uploads/s, and the range over rounds"
              + (f"; notifications to {webhook}" if webhook else "; no webhook"))
        print(f"  {'workers':>7} {'uploads/s':>10} {'p50 ms':>8} {'p99 ms':>8}  "
              f"{'range uploads/s':>16} {'range p99 ms':>14}  statuses")
        for workers in [int(w) for w in args.workers.split(",")]:
            with fresh_schema(args.postgres_url) as url, serve(url, workers, webhook) as base:
                rounds = run_uploads(base, logs, args.uploads, args.clients, args.rounds)
                if receiver:
                    time.sleep(2)  # the last notifications' delivery
                    print(f"  webhook received {dict(sorted(receiver.events.items()))}", flush=True)
                    receiver.events.clear()
            rounds.sort(key=lambda r: r["per_s"])
            median = rounds[len(rounds) // 2]
            statuses: dict[int, int] = {}
            for r in rounds:
                for code, n in r["statuses"].items():
                    statuses[code] = statuses.get(code, 0) + n
            per_s = f"{rounds[0]['per_s']:.0f}-{rounds[-1]['per_s']:.0f}"
            p99 = f"{min(r['p99_ms'] for r in rounds):.0f}-{max(r['p99_ms'] for r in rounds):.0f}"
            print(f"  {workers:>7} {median['per_s']:>10.1f} {median['p50_ms']:>8.1f} "
                  f"{median['p99_ms']:>8.1f}  {per_s:>16} {p99:>14}  {statuses}", flush=True)

    if not args.skip_in_process:
        print(f"\n[in process, no HTTP] ingest_upload from {args.clients} threads, one process")
        print(f"  {'uploads/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
        with fresh_schema(args.postgres_url) as url:
            result = in_process_ingest(url, logs, min(args.uploads, 150), args.clients)
        print(f"  {result['per_s']:>10.1f} {result['p50_ms']:>8.1f} {result['p99_ms']:>8.1f}", flush=True)

    if not args.skip_match:
        from kb.db import migrate

        sizes = [int(s) for s in args.match_sizes.split(",")]
        print(f"\n[match] find_match in process, {args.match_queries} queries (half exact, half "
              f"fuzzy variants), candidate limit {args.candidates} (target p99 <= 20 ms at 100k)")
        print(f"  {'stored':>8} {'p50 ms':>8} {'p99 ms':>8} {'exact p99':>10} {'fuzzy p99':>10}  statuses")
        with fresh_schema(args.postgres_url) as url:
            db = Database(url, pool_size=2)
            migrate.upgrade(db.engine)
            stored = 0
            for size in sizes:
                t = time.perf_counter()
                bulk_insert(url, stored + 1, size - stored, rng)
                insert_s = time.perf_counter() - t
                stored = size
                result = time_matches(db, url, stored, args.match_queries, rng, args.candidates)
                print(f"  {stored:>8} {result['p50_ms']:>8.2f} {result['p99_ms']:>8.2f} "
                      f"{result['exact_p99_ms']:>10.2f} {result['fuzzy_p99_ms']:>10.2f}  "
                      f"{result['statuses']} (bulk insert {insert_s:.1f}s)", flush=True)
            db.dispose()


if __name__ == "__main__":
    main()
