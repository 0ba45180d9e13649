"""Generate a large, realistic vLLM V1 serving log with one buried worker crash.

The log imitates a long-running container: an API server, one or two EngineCore processes
and eight GPU workers, restarted a few times (each start-up prints progress bars with
carriage returns), serving traffic in between (access lines, periodic metrics, warnings,
Python warnings, benign tracebacks the engine recovers from). At about 70% of the file one
start-up fails: a worker raises, the EngineCore wrapper ("Engine core initialization
failed") and the API server report it, teardown noise follows, and the container is
restarted and serves again until the requested size is reached.

Output is streamed to disk in blocks, so a 1 GB log needs only a few MB of memory. The same
arguments always give the same bytes (fixed seed).

    python bench/gen_vllm_log.py --size-mb 100 --out bench/out/vllm-100mb.log

A summary of the buried crash (what `kb analyze` must find) is printed as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

SP = "/usr/local/lib/python3.12/dist-packages"
MODEL = "moonshotai/Kimi-K2.5"
DRAFT = "/data/eagle3/output_10k/4"
VERSION = "0.15.1"
CRASH = {
    "startup": {
        "exception": "AttributeError",
        "message": "'KimiK25Config' object has no attribute 'image_token_index'",
    },
    "serving": {
        "exception": "torch.AcceleratorError",
        "message": "CUDA error: an illegal memory access was encountered",
    },
}
CUDA_TAIL = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]


class Clock:
    """Simulated wall clock; vLLM prints `MM-DD HH:MM:SS`."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def ts(self) -> str:
        return self.now.strftime("%m-%d %H:%M:%S")


class Topology:
    """Process labels of one server start (pids change at every restart)."""

    def __init__(self, rng: random.Random, dp: int, tp: int, style: str) -> None:
        base = rng.randrange(2000, 60000)
        self.api = f"(APIServer pid={base}) "
        self.cores = [f"(EngineCore_DP{d} pid={base + 150 + d}) " for d in range(dp)]
        self.workers: list[str] = []
        self.worker_names: list[str] = []
        pid = base + 300
        for d in range(dp):
            for t in range(tp):
                if style == "old":
                    name = f"VllmWorker TP{t}" if dp == 1 else f"VllmWorker DP{d}_TP{t}"
                else:
                    name = f"Worker_TP{t}" if dp == 1 else f"Worker_DP{d}_TP{t}"
                self.worker_names.append(f"{name} pid={pid}")
                self.workers.append(f"({name} pid={pid}) ")
                pid += 1
        self.tp = tp
        self.dp = dp


class Writer:
    """Buffers lines and flushes them to the file in large blocks."""

    def __init__(self, path: Path, limit: int) -> None:
        self.f = open(path, "wb")
        self.buf: list[str] = []
        self.size = 0
        self.pending = 0
        self.limit = limit

    def line(self, text: str) -> None:
        self.buf.append(text)
        self.pending += len(text) + 1

    def lines(self, texts: list[str]) -> None:
        for t in texts:
            self.line(t)

    def flush(self) -> None:
        if self.buf:
            data = ("\n".join(self.buf) + "\n").encode("utf-8")
            self.f.write(data)
            self.size += len(data)
            self.buf.clear()
            self.pending = 0

    def maybe_flush(self) -> None:
        if self.pending > 1 << 20:
            self.flush()

    @property
    def written(self) -> int:
        return self.size + self.pending

    def close(self) -> None:
        self.flush()
        self.f.close()


def log(prefix: str, level: str, clock: Clock, src: str, msg: str) -> str:
    return f"{prefix}{level} {clock.ts()} [{src}] {msg}"


def startup(w: Writer, rng: random.Random, clock: Clock, topo: Topology, speculative: bool) -> None:
    api = topo.api
    spec = (
        f", 'speculative_config': {{'method': 'eagle3', 'model': '{DRAFT}', 'num_speculative_tokens': 5}}"
        if speculative
        else ""
    )
    w.line(log(api, "INFO", clock, "api_server.py:1351", f"vLLM API server version {VERSION}"))
    w.line(log(api, "INFO", clock, "utils.py:253",
               f"non-default args: {{'model_tag': '{MODEL}', 'host': '0.0.0.0', 'model': '{MODEL}', "
               f"'trust_remote_code': True, 'max_model_len': 65536, 'tensor_parallel_size': {topo.tp}, "
               f"'data_parallel_size': {topo.dp}{spec}}}"))
    clock.tick(6.3)
    w.line(log(api, "INFO", clock, "model.py:541", "Resolved architecture: KimiK25ForConditionalGeneration"))
    w.line(f"{api}`torch_dtype` is deprecated! Use `dtype` instead!")
    w.line(log(api, "INFO", clock, "model.py:1561", "Using max model len 65536"))
    w.line(log(api, "INFO", clock, "scheduler.py:226", "Chunked prefill is enabled with max_num_batched_tokens=8192."))
    w.line("<frozen importlib._bootstrap_external>:1301: FutureWarning: The cuda.cudart module is deprecated "
           "and will be removed in a future release, please switch to use the cuda.bindings.runtime module instead.")
    clock.tick(8.1)
    for core in topo.cores:
        w.line(log(core, "INFO", clock, "core.py:96",
                   f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{MODEL}', "
                   f"speculative_config={'SpeculativeConfig(method=' + repr('eagle3') + ', num_spec_tokens=5)' if speculative else None}, "
                   f"tokenizer='{MODEL}', trust_remote_code=True, dtype=torch.bfloat16, max_seq_len=65536, "
                   f"tensor_parallel_size={topo.tp}, pipeline_parallel_size=1, data_parallel_size={topo.dp}, "
                   "quantization=compressed-tensors, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda"))
        w.line(log(core, "WARNING", clock, "multiproc_executor.py:869",
                   "Reducing Torch parallelism from 96 threads to 1 to avoid unnecessary CPU contention. "
                   "Set OMP_NUM_THREADS in the external environment to tune this value as needed."))
    clock.tick(11.7)
    for i, wp in enumerate(topo.workers):
        t = i % topo.tp
        d = i // topo.tp
        w.line(log(wp, "INFO", clock, "parallel_state.py:1212",
                   f"rank {i} in world size {len(topo.workers)} is assigned as DP rank {d}, PP rank 0, TP rank {t}, EP rank {i}"))
        w.line(log(wp, "WARNING", clock, "gpt_oss_triton_kernels_moe.py:38",
                   "Failed to import Triton kernels. Please make sure your triton version is compatible. "
                   "Error: No module named 'triton_kernels.routing'"))
        w.line(f"{wp}/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml "
               "package is deprecated. Please install nvidia-ml-py instead.")
    for wp in topo.workers:
        w.line(log(wp, "INFO", clock, "gpu_model_runner.py:3551", f"Starting to load model {MODEL}..."))
    shards = 64
    w0 = topo.workers[0]
    bar = []
    for k in range(0, shards + 1, 2):
        pct = k * 100 // shards
        bar.append(f"\rLoading safetensors checkpoint shards: {pct:3d}% Completed | {k}/{shards} "
                   f"[{k * 27 // 60:02d}:{k * 27 % 60:02d}<{(shards - k) * 27 // 60:02d}:{(shards - k) * 27 % 60:02d}, 27.5{rng.randrange(10)}s/it]")
    w.line(w0 + "".join(bar))
    w.line(w0)
    clock.tick(1763.4)
    for wp in topo.workers:
        w.line(log(wp, "INFO", clock, "default_loader.py:308", f"Loading weights took {1760 + rng.random() * 9:.2f} seconds"))


def serving_ready(w: Writer, rng: random.Random, clock: Clock, topo: Topology) -> None:
    for wp in topo.workers:
        w.line(log(wp, "INFO", clock, "gpu_model_runner.py:3653", "Model loading took 71.3814 GiB and 1780.114702 seconds"))
    clock.tick(42.0)
    for core in topo.cores:
        w.line(log(core, "INFO", clock, "kv_cache_utils.py:1087", "GPU KV cache size: 1,212,416 tokens"))
        w.line(log(core, "INFO", clock, "kv_cache_utils.py:1091", "Maximum concurrency for 65,536 tokens per request: 18.50x"))
    w0 = topo.workers[0]
    bar = "".join(f"\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): {k * 100 // 67:3d}%|{'█' * (k * 10 // 67):<10}| {k}/67 "
                  f"[00:{k * 19 // 67:02d}<00:{(67 - k) * 19 // 67:02d},  3.5{rng.randrange(10)}it/s]" for k in range(0, 68, 4))
    w.line(w0 + bar)
    clock.tick(24.0)
    for core in topo.cores:
        w.line(log(core, "INFO", clock, "core.py:210",
                   "init engine (profile, create kv cache, warmup model) took 71.44 seconds"))
    w.line(log(topo.api, "INFO", clock, "api_server.py:1634", "Starting vLLM API server 0 on http://0.0.0.0:8000"))
    w.line(f"{topo.api}INFO:     Started server process [{topo.api.split('=')[1].rstrip(') ')}]")
    w.line(f"{topo.api}INFO:     Waiting for application startup.")
    w.line(f"{topo.api}INFO:     Application startup complete.")


BENIGN_TB = [
    "Traceback (most recent call last):",
    f'  File "{SP}/vllm/v1/structured_output/backend_xgrammar.py", line 188, in compile_grammar',
    "    ctx = self.compiler.compile_json_schema(grammar_spec, any_whitespace=not self.disable_any_whitespace)",
    "          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{SP}/xgrammar/compiler.py", line 215, in compile_json_schema',
    "    self._handle.compile_json_schema(",
    "RuntimeError: [14:02:11] /project/cpp/json_schema_converter.cc:823: Check failed: (schema.is<picojson::object>()) is false: Schema should be an object or bool",
]


def serve(w: Writer, rng: random.Random, clock: Clock, topo: Topology, until: int) -> None:
    """Steady-state traffic until the file reaches `until` bytes."""
    api = topo.api
    core0 = topo.cores[0]
    ips = [f"10.0.{rng.randrange(1, 9)}.{rng.randrange(2, 250)}" for _ in range(24)]
    n = 0
    while w.written < until:
        n += 1
        clock.tick(rng.random() * 0.05)
        r = rng.random()
        if r < 0.78:
            ip = ips[n % len(ips)]
            path = "/v1/chat/completions" if r < 0.7 else "/v1/completions"
            w.line(f'{api}INFO:     {ip}:{rng.randrange(30000, 65000)} - "POST {path} HTTP/1.1" 200 OK')
        elif r < 0.93:
            for e in range(len(topo.cores)):
                w.line(log(api, "INFO", clock, "loggers.py:127",
                           f"Engine {e:03d}: Avg prompt throughput: {rng.random() * 9000:.1f} tokens/s, "
                           f"Avg generation throughput: {rng.random() * 2400:.1f} tokens/s, Running: {rng.randrange(1, 96)} reqs, "
                           f"Waiting: {rng.randrange(0, 12)} reqs, GPU KV cache usage: {rng.random() * 60:.1f}%, "
                           f"Prefix cache hit rate: {rng.random() * 70:.1f}%"))
            if r < 0.80:
                w.line(log(api, "INFO", clock, "metrics.py:96",
                           f"SpecDecoding metrics: Mean acceptance length: 1.{rng.randrange(40, 99)}, Accepted throughput: "
                           f"{rng.random() * 300:.2f} tokens/s, Drafted throughput: {rng.random() * 900:.2f} tokens/s"))
        elif r < 0.96:
            wp = topo.workers[rng.randrange(len(topo.workers))]
            w.line(log(wp, "WARNING", clock, "fused_moe.py:798",
                       "Using default MoE config. Performance might be sub-optimal! Config file not found at "
                       f"['{SP}/vllm/model_executor/layers/fused_moe/configs/E=384,N=256,device_name=NVIDIA_H200,dtype=int4_w4a16.json']"))
        elif r < 0.985:
            w.line(log(api, "WARNING", clock, "protocol.py:93",
                       "The following fields were present in the request but ignored: {'metadata', 'store'}"))
            w.line(f'{api}INFO:     {ips[n % len(ips)]}:{rng.randrange(30000, 65000)} - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request')
        elif r < 0.995:
            w.line(log(core0, "WARNING", clock, "structured_output/__init__.py:120",
                       f"Grammar compilation failed for request chatcmpl-{rng.getrandbits(64):016x}; aborting the request."))
            w.lines([f"{core0}WARNING {clock.ts()} [structured_output/__init__.py:120] {x}" for x in BENIGN_TB])
        else:
            w.line(f"{core0}/usr/local/lib/python3.12/dist-packages/torch/_dynamo/variables/functions.py:1481: "
                   "FutureWarning: `torch._dynamo.config.capture_scalar_outputs` is deprecated; it will be removed in a future release.")
        w.maybe_flush()


def shutdown(w: Writer, clock: Clock, topo: Topology) -> None:
    api = topo.api
    w.line(f"{api}INFO:     Shutting down")
    w.line(f"{api}INFO:     Waiting for application shutdown.")
    w.line(f"{api}INFO:     Application shutdown complete.")
    for wp in topo.workers:
        w.line(log(wp, "INFO", clock, "multiproc_executor.py:707", "Parent process exited, terminating worker"))
    clock.tick(20.0)


def crash_startup(w: Writer, rng: random.Random, clock: Clock, topo: Topology) -> dict:
    """A worker fails while loading the EAGLE-3 drafter; the wrappers follow."""
    wi = 3
    wp = topo.workers[wi]
    p = f"{wp}ERROR {clock.ts()} [multiproc_executor.py:783] "
    start = w.written
    tb = [
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        f'  File "{SP}/vllm/v1/executor/multiproc_executor.py", line 754, in worker_main',
        "    worker = WorkerProc(*args, **kwargs)",
        "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SP}/vllm/v1/executor/multiproc_executor.py", line 580, in __init__',
        "    self.worker.load_model()",
        f'  File "{SP}/vllm/v1/worker/gpu_worker.py", line 289, in load_model',
        "    self.model_runner.load_model(eep_scale_up=eep_scale_up)",
        f'  File "{SP}/vllm/v1/worker/gpu_model_runner.py", line 3612, in load_model',
        "    self.drafter.load_model(self.model)",
        f'  File "{SP}/vllm/v1/spec_decode/eagle.py", line 1021, in load_model',
        "    self.model.config.image_token_index = target_model.config.image_token_index",
        "                                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SP}/transformers/configuration_utils.py", line 207, in __getattribute__',
        "    return super().__getattribute__(key)",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f"AttributeError: {CRASH['startup']['message']}",
    ]
    # interleave with another worker still logging its own progress
    other = topo.workers[(wi + 1) % len(topo.workers)]
    for i, line in enumerate(tb):
        w.line(p + line)
        if i in (4, 11):
            w.line(log(other, "INFO", clock, "gpu_model_runner.py:3590", "Loading drafter model..."))
    clock.tick(2.0)
    core = topo.cores[0]
    cp = f"{core}ERROR {clock.ts()} [core.py:946] "
    w.lines([cp + x for x in [
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        f'  File "{SP}/vllm/v1/engine/core.py", line 937, in run_engine_core',
        "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
        "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SP}/vllm/v1/executor/multiproc_executor.py", line 166, in _init_executor',
        "    self.workers = WorkerProc.wait_for_ready(unready_workers)",
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SP}/vllm/v1/executor/multiproc_executor.py", line 682, in wait_for_ready',
        "    raise e from None",
        "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
    ]])
    w.lines([topo.api + x for x in [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 10, in <module>',
        "    sys.exit(main())",
        "             ^^^^^^",
        f'  File "{SP}/vllm/v1/engine/utils.py", line 960, in wait_for_engine_startup',
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]])
    teardown(w)
    return {"process": topo.worker_names[wi], "byte_offset": start, **CRASH["startup"]}


def crash_serving(w: Writer, rng: random.Random, clock: Clock, topo: Topology) -> dict:
    """A worker hits an illegal memory access while serving; EngineDeadError follows."""
    wi = 5
    wp = topo.workers[wi]
    p = f"{wp}ERROR {clock.ts()} [multiproc_executor.py:671] "
    start = w.written
    msg = [CRASH["serving"]["message"], *CUDA_TAIL]
    w.lines([p + x for x in [
        "WorkerProc hit an exception.",
        "Traceback (most recent call last):",
        f'  File "{SP}/vllm/v1/executor/multiproc_executor.py", line 666, in worker_busy_loop',
        "    output = func(*args, **kwargs)",
        "             ^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SP}/vllm/v1/worker/gpu_model_runner.py", line 2402, in execute_model',
        "    valid_sampled_token_ids = self._to_list(sampled_token_ids)",
        "                              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SP}/torch/cuda/streams.py", line 231, in synchronize',
        "    super().synchronize()",
        f"torch.AcceleratorError: {msg[0]}",
        *msg[1:],
        "",
    ]])
    core = topo.cores[0]
    cp = f"{core}ERROR {clock.ts()} [core.py:710] "
    w.lines([cp + x for x in [
        "EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        f'  File "{SP}/vllm/v1/executor/multiproc_executor.py", line 243, in get_response',
        "    raise RuntimeError(",
        f"RuntimeError: Worker failed with error '{msg[0]}",
        *msg[1:],
        "', please check the stack trace above for the root cause",
    ]])
    ap = f"{topo.api}ERROR {clock.ts()} [async_llm.py:480] "
    w.lines([ap + x for x in [
        "AsyncLLM output_handler failed.",
        "Traceback (most recent call last):",
        f'  File "{SP}/vllm/v1/engine/core_client.py", line 846, in get_output_async',
        "    raise self._format_exception(outputs) from None",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    ]])
    for _ in range(12):
        w.line(f'{topo.api}INFO:     10.0.3.17:{rng.randrange(30000, 65000)} - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error')
    teardown(w)
    return {"process": topo.worker_names[wi], "byte_offset": start, **CRASH["serving"]}


def teardown(w: Writer) -> None:
    w.lines([
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown",
        "  warnings.warn('resource_tracker: There appear to be %d '",
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown",
        "  warnings.warn('resource_tracker: There appear to be %d '",
        "[rank0]:[W222 18:45:24.402177381 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    ])


def generate(out: Path, size_mb: float, seed: int = 20250222, crash: str = "startup", dp: int = 1,
             style: str = "new", crash_at: float = 0.7) -> dict:
    target = int(size_mb * 1024 * 1024)
    rng = random.Random(seed)
    clock = Clock(datetime(2026, 2, 20, 6, 0, 0))
    out.parent.mkdir(parents=True, exist_ok=True)
    w = Writer(out, target)
    crash_pos = int(target * crash_at)
    # a restart every ~25 MB (and never the crashing session)
    segment = max(4 << 20, min(25 << 20, crash_pos // 3))
    info: dict = {}
    crashed = False
    while w.written < target:
        topo = Topology(rng, dp, 8 // dp, style)
        if not crashed and crash == "startup" and w.written >= crash_pos - (64 << 10):
            # the start-up that fails: the only session launched with speculative decoding
            startup(w, rng, clock, topo, speculative=True)
            info = crash_startup(w, rng, clock, topo)
            crashed = True
            clock.tick(45.0)
            continue
        startup(w, rng, clock, topo, speculative=False)
        serving_ready(w, rng, clock, topo)
        if not crashed and crash == "serving" and w.written + segment >= crash_pos:
            serve(w, rng, clock, topo, crash_pos)
            info = crash_serving(w, rng, clock, topo)
            crashed = True
            clock.tick(45.0)
            continue
        end = min(target, w.written + segment) if crashed else min(crash_pos, w.written + segment)
        serve(w, rng, clock, topo, end)
        if w.written < target:
            shutdown(w, clock, topo)
    w.close()
    info.update({"path": str(out), "bytes": w.size, "seed": seed, "crash": crash})
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=100.0, help="approximate size of the log (default 100)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "vllm-100mb.log")
    ap.add_argument("--seed", type=int, default=20250222)
    ap.add_argument("--crash", choices=sorted(CRASH), default="startup",
                    help="startup: worker fails loading the drafter; serving: illegal memory access")
    ap.add_argument("--dp", type=int, choices=(1, 2), default=1, help="EngineCore processes (8 workers in total)")
    ap.add_argument("--style", choices=("new", "old"), default="new",
                    help="worker prefix: new `(Worker_TP3 pid=..)`, old `(VllmWorker TP3 pid=..)`")
    args = ap.parse_args(argv)
    if args.style == "old" and args.dp != 1:
        ap.error("--style old (VllmWorker TPn, vLLM <= 0.10) is only written with --dp 1")
    info = generate(args.out, args.size_mb, args.seed, args.crash, args.dp, args.style)
    json.dump(info, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
