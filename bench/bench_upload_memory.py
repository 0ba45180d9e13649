"""Peak memory of `kb serve` under concurrent large uploads (a script, not a test).

  .venv/bin/python bench/bench_upload_memory.py --clients 16 --size-mb 200 --bombs 16

Starts `kb serve` on a throwaway SQLite file, sends N concurrent plain uploads of a
SIZE MB log and N concurrent gzip bombs (a few MB of gzip that inflate far past the
upload limit), all on loopback, and prints the server's peak RSS (VmHWM) and its RSS
once they are done, next to the statuses the uploads got."""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _bomb(inflated_mb: int) -> bytes:
    """gzip of `inflated_mb` MiB of zeros, made in chunks."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join([*(deflate.compress(block) for _ in range(inflated_mb)), deflate.flush()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--bombs", type=int, default=16)
    parser.add_argument("--bomb-mb", type=int, default=10240, help="MiB each bomb inflates to")
    args = parser.parse_args()

    line = b"INFO 12-01 10:00:00 [loader.py:88] " + b"weights shard loaded " * 40 + b"\n"
    log = line * (args.size_mb * (1 << 20) // len(line)) + b"RuntimeError: CUDA error: out of memory\n"
    bomb = _bomb(args.bomb_mb)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "KB_DATABASE_URL": f"sqlite:///{tmp}/kb.db", "KB_SEED": "0", "KB_LOG_LEVEL": "warning"}
        port = 8600 + os.getpid() % 300
        server = subprocess.Popen([sys.executable, "-m", "kb.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(120):
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            baseline = _rss_kib(server.pid, "VmRSS")
            statuses: Counter[str] = Counter()

            def send(body: bytes, encoding: str | None) -> None:
                headers = {"Content-Type": "text/plain", "Accept": "application/json"}
                if encoding:
                    headers["Content-Encoding"] = encoding
                try:
                    answer = httpx.post(f"{base}/incidents", content=body, headers=headers, timeout=600)
                    statuses[f"{'bomb' if encoding else 'plain'} {answer.status_code}"] += 1
                except httpx.HTTPError as exc:
                    statuses[f"{'bomb' if encoding else 'plain'} {type(exc).__name__}"] += 1

            started = time.monotonic()
            threads = [threading.Thread(target=send, args=(log, None)) for _ in range(args.clients)]
            threads += [threading.Thread(target=send, args=(bomb, "gzip")) for _ in range(args.bombs)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
            time.sleep(2)
            peak, after = _rss_kib(server.pid, "VmHWM"), _rss_kib(server.pid, "VmRSS")
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"{args.clients} x {args.size_mb} MB plain uploads + {args.bombs} gzip bombs "
          f"({len(bomb) / 2**20:.1f} MB inflating to {args.bomb_mb} MiB), concurrent, {elapsed:.1f} s")
    print(f"server RSS: baseline {baseline / 1024:.0f} MB, peak {peak / 1024:.0f} MB, after {after / 1024:.0f} MB "
          f"(target: peak <= 1024 MB, back near baseline)")
    print(f"statuses: {dict(sorted(statuses.items()))}")


if __name__ == "__main__":
    main()
