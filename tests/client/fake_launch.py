"""A fake multi-process vLLM launch, for wrapping with `kb run` in tests.

It really is several processes: the "API server" (this process) starts an EngineCore-
style loop and two VllmWorker processes (`worker` mode of this same script), each
printing its own lines with its real pid in vLLM's v1 format. The log text is written
for these tests (in the format, not copied from any report).

Modes:
  crash    worker TP1 dies with a CUDA OOM traceback, the wrappers report it, exit 1
  hang     same output, then every process keeps running (no exit)
  ok       start-up with a progress bar, then exit 0
  serve    start-up, then wait for the engine forever; record signals to --marker
  stubborn like serve, but ignore SIGINT and SIGTERM (only SIGKILL stops it)
  kill9    start-up, then die by SIGKILL (as the OOM killer does)
Options: --pids FILE (pids of every process, one a line), --marker FILE (signals seen),
--flood MB (that many megabytes of start-up INFO lines before the workers start).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

STAMP = time.strftime("%m-%d %H:%M:%S")
PYFILE = "/opt/venv/lib/python3.12/site-packages"


def out(line: str, stream=None) -> None:
    stream = stream or sys.stdout
    stream.write(line + "\n")
    stream.flush()


def prefix(role: str) -> str:
    return f"({role} pid={os.getpid()})"


def note_pid(path: str | None) -> None:
    if path:
        with open(path, "a") as handle:
            handle.write(f"{os.getpid()}\n")


def record_signals(marker: str | None, who: str) -> None:
    def handler(signum: int, _frame: object) -> None:
        if marker:
            with open(marker, "a") as handle:
                handle.write(f"{who} {signal.Signals(signum).name}\n")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # die by the signal, as an unhandled one would

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)


def worker(rank: int, mode: str, pids: str | None, marker: str | None) -> None:
    note_pid(pids)
    p = prefix(f"VllmWorker TP{rank}")
    if mode == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        record_signals(marker, f"worker{rank}")
    out(f"{p} INFO {STAMP} [parallel_state.py:1134] rank {rank} in world size 2 is assigned as DP rank 0, PP rank 0, TP rank {rank}, EP rank {rank}")
    if mode in ("crash", "hang") and rank == 1:
        time.sleep(0.1)
        err = f"{p} ERROR {STAMP} [multiproc_executor.py:585]"
        for line in (
            "WorkerProc failed to start.",
            "Traceback (most recent call last):",
            f'  File "{PYFILE}/vllm/v1/executor/multiproc_executor.py", line 559, in worker_main',
            "    worker = WorkerProc(*args, **kwargs)",
            f'  File "{PYFILE}/vllm/v1/worker/gpu_worker.py", line 233, in load_model',
            "    self.model_runner.load_model(eep_scale_up=eep_scale_up)",
            f'  File "{PYFILE}/torch/nn/modules/module.py", line 1355, in to',
            "    return fn(t.to(device, dtype if t.is_floating_point() else None, non_blocking))",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 1 has a total capacity of 79.19 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 78.06 GiB memory in use.",
        ):
            out(f"{err} {line}")
        if mode == "crash":
            sys.exit(1)
    while True:  # serve / hang / stubborn, and the healthy rank of crash (killed below)
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--worker-mode", default="")
    parser.add_argument("--pids")
    parser.add_argument("--marker")
    parser.add_argument("--flood", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "worker":
        worker(args.rank, args.worker_mode, args.pids, args.marker)
        return

    mode = args.mode
    note_pid(args.pids)
    if mode == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        record_signals(args.marker, "main")
    api = prefix("APIServer")
    out(f"INFO {STAMP} [__init__.py:241] Automatically detected platform cuda.")
    out(f"{api} INFO {STAMP} [api_server.py:1805] vLLM API server version 0.10.1.1")
    out(f"{api} INFO {STAMP} [utils.py:326] non-default args: {{'model': 'Qwen/Qwen3-30B-A3B', 'tensor_parallel_size': 2}}")
    if mode == "ok":
        for pct in (0, 25, 50, 75, 100):  # a tqdm-style bar rewritten in place
            sys.stderr.write(f"\rLoading safetensors checkpoint shards: {pct:3d}% Completed | {pct // 25}/4")
            sys.stderr.flush()
            time.sleep(0.02)
        sys.stderr.write("\n")
        out(f"{api} INFO {STAMP} [launcher.py:29] Available routes are: /health, /v1/models")
        return
    if mode == "kill9":
        os.kill(os.getpid(), signal.SIGKILL)
    if args.flood:  # a long, chatty start-up: 4 KiB lines, written a megabyte at a time
        line = f"{api} INFO {STAMP} [loader.py:88] " + "weights shard loaded " * 190 + "\n"
        block = line * (1024 * 1024 // len(line))
        for _ in range(args.flood):
            sys.stdout.write(block)
        sys.stdout.flush()

    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", "--rank", str(rank), "--worker-mode", mode]
            + (["--pids", args.pids] if args.pids else [])
            + (["--marker", args.marker] if args.marker else [])
        )
        for rank in (0, 1)
    ]
    engine = prefix("EngineCore_0")
    out(f"{engine} INFO {STAMP} [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: model='Qwen/Qwen3-30B-A3B', tensor_parallel_size=2, dtype=torch.bfloat16")
    if mode in ("serve", "stubborn"):
        out(f"{api} INFO {STAMP} [core_client.py:570] Waiting for 1 local, 0 remote core engine proc(s) to start.")
        while True:
            time.sleep(0.2)

    workers[1].wait(timeout=30) if mode == "crash" else time.sleep(0.3)
    err = f"{engine} ERROR {STAMP} [core.py:700]"
    for line in (
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        f'  File "{PYFILE}/vllm/v1/engine/core.py", line 691, in run_engine_core',
        "    engine_core = EngineCoreProc(*args, **kwargs)",
        f'  File "{PYFILE}/vllm/v1/executor/multiproc_executor.py", line 491, in wait_for_ready',
        "    raise e from None",
        "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
    ):
        out(f"{err} {line}")
    for line in (
        "Traceback (most recent call last):",
        f'  File "{PYFILE}/vllm/v1/engine/utils.py", line 433, in wait_for_engine_startup',
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ):
        out(f"{api} {line}", sys.stderr)
    if mode == "hang":
        while True:
            time.sleep(0.2)
    for proc in workers:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)
    sys.exit(1)


if __name__ == "__main__":
    main()
