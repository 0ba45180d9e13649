"""Builders of crash logs in vLLM's real multi-process format (our own text, written to
look like what `vllm serve` prints), for the service tests and the benchmark."""

from __future__ import annotations

import random

SITE = "/opt/venv/lib/python3.12/site-packages"


def _frames(frames: list[tuple[str, int, str, str]]) -> list[str]:
    out = []
    for path, line, func, code in frames:
        out.append(f'  File "{SITE}/{path}", line {line}, in {func}')
        out.append(f"    {code}")
    return out


DEFAULT_FRAMES = [
    ("vllm/v1/executor/multiproc_executor.py", 559, "worker_main", "worker = WorkerProc(*args, **kwargs)"),
    ("vllm/v1/executor/multiproc_executor.py", 420, "__init__", "self.worker.load_model()"),
    ("vllm/v1/worker/gpu_worker.py", 213, "load_model", "self.model_runner.load_model(eep_scale_up=eep_scale_up)"),
    ("vllm/v1/worker/gpu_model_runner.py", 2012, "load_model", "self.model = model_loader.load_model("),
    ("vllm/model_executor/model_loader/base_loader.py", 45, "load_model", "model = initialize_model("),
]


def vllm_log(exception: str = "ValueError",
             message: str = "No available memory for the cache blocks. Try increasing "
                            "`gpu_memory_utilization` when initializing the engine.",
             *, version: str = "0.11.0", model: str = "moonshotai/Kimi-K2-Instruct",
             tp: int = 4, gpu: str = "NVIDIA H100 80GB HBM3",
             frames: list[tuple[str, int, str, str]] | None = None,
             noise_lines: int = 20, seed: int = 0, date: str = "02-22") -> str:
    """A vLLM V1 server log: API server start, engine core, TP workers, noise, then one
    worker's traceback, the engine core's wrapper error and the API server's exit."""
    rng = random.Random(seed)
    api, core = "(APIServer pid=361800)", "(EngineCore_DP0 pid=362045)"
    t = f"{date} 17:51"
    lines = [
        f"INFO {t}:00 [__init__.py:216] Automatically detected platform cuda.",
        f"{api} INFO {t}:01 [api_server.py:1839] vLLM API server version {version}",
        f"{api} INFO {t}:01 [utils.py:233] non-default args: {{'model': '{model}', "
        f"'tensor_parallel_size': {tp}, 'trust_remote_code': True}}",
        f"{api} INFO {t}:09 [model.py:547] Resolved architecture: DeepseekV3ForCausalLM",
        f"{core} INFO {t}:12 [core.py:77] Initializing a V1 LLM engine (v{version}) with config: "
        f"model='{model}', dtype=torch.bfloat16, max_seq_len=131072, tensor_parallel_size={tp}, "
        f"pipeline_parallel_size=1, data_parallel_size=1, quantization=fp8",
    ]
    for rank in range(tp):
        pid = 362100 + rank
        lines.append(f"(Worker_TP{rank} pid={pid}) INFO {t}:20 [parallel_state.py:1208] rank {rank} "
                     f"in world size {tp} is assigned as DP rank 0, PP rank 0, TP rank {rank}, EP rank {rank}")
        lines.append(f"(Worker_TP{rank} pid={pid}) INFO {t}:21 [gpu_worker.py:91] Using device "
                     f"cuda:{rank} ({gpu})")
    for n in range(noise_lines):
        rank = rng.randrange(tp)
        pct = min(100, n * 100 // max(1, noise_lines))
        lines.append(f"(Worker_TP{rank} pid={362100 + rank}) INFO {t}:{30 + n % 20:02d} "
                     f"[default_loader.py:267] Loading safetensors checkpoint shards: {pct}% "
                     f"Completed | {n}/{noise_lines} [00:{n % 60:02d}<00:{(noise_lines - n) % 60:02d}, "
                     f"{rng.uniform(1, 3):.2f}it/s]")
    crash = f"{date} 17:52:14"
    worker = f"(Worker_TP1 pid={362101})"
    tb = ["Traceback (most recent call last):", *_frames(frames or DEFAULT_FRAMES),
          f"{exception}: {message}"]
    lines.append(f"{worker} ERROR {crash} [multiproc_executor.py:585] WorkerProc failed to start.")
    lines += [f"{worker} ERROR {crash} [multiproc_executor.py:585] {line}" for line in tb]
    lines += [
        f"{core} ERROR {crash} [core.py:708] EngineCore failed to start.",
        f"{core} ERROR {crash} [core.py:708] Traceback (most recent call last):",
        f'{core} ERROR {crash} [core.py:708]   File "{SITE}/vllm/v1/engine/core.py", line 699, in run_engine_core',
        f"{core} ERROR {crash} [core.py:708]     engine_core = EngineCoreProc(*args, **kwargs)",
        f"{core} ERROR {crash} [core.py:708] Exception: WorkerProc initialization failed due to an "
        f"exception in a background process. See stack trace for root cause.",
        f"{api} Traceback (most recent call last):",
        f'{api}   File "{SITE}/vllm/entrypoints/cli/main.py", line 54, in main',
        f"{api}     args.dispatch_function(args)",
        f"{api} RuntimeError: Engine core initialization failed. See root cause above. "
        f"Failed core proc(s): {{}}",
    ]
    return "\n".join(lines) + "\n"


def big_vllm_log(target_bytes: int = 1_000_000, **kwargs: object) -> str:
    """A realistic ~1 MB log: a long, interleaved start-up before the crash."""
    small = vllm_log(noise_lines=100, **kwargs)  # type: ignore[arg-type]
    larger = vllm_log(noise_lines=1100, **kwargs)  # type: ignore[arg-type]
    per_line = (len(larger) - len(small)) / 1000
    lines = 100 + int((target_bytes - len(small)) / per_line)
    return vllm_log(noise_lines=max(10, lines), **kwargs)  # type: ignore[arg-type]


# A second, unrelated crash: an NCCL failure during CUDA graph capture.
NCCL = dict(exception="torch.distributed.DistBackendError",
            message="NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
                    "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            frames=[("vllm/v1/worker/gpu_model_runner.py", 2345, "capture_model", "self._dummy_run("),
                    ("vllm/distributed/parallel_state.py", 480, "all_reduce", "return self.device_communicator.all_reduce(input_)"),
                    ("torch/distributed/distributed_c10d.py", 2806, "all_reduce", "work = group.allreduce([tensor], opts)")])

HEADS = dict(exception="ValueError",
             message="Total number of attention heads (40) must be divisible by tensor parallel size (6).",
             frames=[("vllm/engine/arg_utils.py", 1390, "create_engine_config", "config = VllmConfig("),
                     ("vllm/config/__init__.py", 1122, "verify_with_parallel_config", "raise ValueError(")])


# A vLLM V1 launch whose log holds only the wrappers: the engine core died without its error.
WRAPPER_ONLY = (
    "INFO 11-30 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
    "ERROR 11-30 10:00:05 [core.py:700] EngineCore failed to start.\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core_client.py", line 90, in make_client\n'
    "    return AsyncMPClient(vllm_config, executor_class, log_stats)\n"
    "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {'EngineCore_DP0': 1}\n")


def with_lines(log: str, *lines: str) -> str:
    """`log` with `lines` printed right before its last three lines (the API server's exit)."""
    head = log.rstrip("\n").split("\n")
    return "\n".join(head[:-3] + list(lines) + head[-3:]) + "\n"
