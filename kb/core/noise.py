"""Bury a crash log in the start-up noise of a long launch, to check that the analyzer's
answer does not depend on how much else the log holds (`kb eval --shapes`, row
`buried-2mb`).

The noise is what a vLLM launch prints before and around a crash and what must never be
taken for its cause: configuration and loading INFO records, tqdm progress bars redrawn
with carriage returns, deprecation and FutureWarning lines, NCCL INFO lines, metrics
lines, and a recovered traceback logged at WARNING level. Pure and deterministic for a
seed."""

from __future__ import annotations

import random

_MODELS = ("meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-235B-A22B", "deepseek-ai/DeepSeek-V3")

_RECOVERED = (
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/structured_output/backend_xgrammar.py", line 90, in compile_grammar',
    "    ctx = self.compiler.compile_json_schema(grammar_spec)",
    "RuntimeError: [12:01:07] json_schema_converter.cc:823: Check failed: (schema.is<picojson::object>()) is false",
)


def _clock(rng: random.Random, step: list[int]) -> str:
    step[0] += rng.randrange(1, 3)
    seconds = step[0]
    return f"05-01 {10 + seconds // 3600 % 12:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _noise_lines(rng: random.Random, step: list[int]):
    """An endless stream of noise records."""
    model = rng.choice(_MODELS)
    n = 0
    while True:
        n += 1
        ts = _clock(rng, step)
        kind = rng.randrange(20)
        if kind < 6:
            yield (f"(EngineCore_DP0 pid=4242) INFO {ts} [loggers.py:123] Engine 000: Avg prompt throughput: "
                   f"{rng.uniform(0, 900):.1f} tokens/s, Avg generation throughput: {rng.uniform(0, 300):.1f} "
                   f"tokens/s, Running: {rng.randrange(64)} reqs, Waiting: 0 reqs, GPU KV cache usage: "
                   f"{rng.uniform(0, 90):.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%")
        elif kind < 10:
            yield (f"(APIServer pid=4200) INFO:     127.0.0.1:{rng.randrange(30000, 60000)} - "
                   f'"POST /v1/chat/completions HTTP/1.1" 200 OK')
        elif kind < 13:
            done = rng.randrange(1, 64)
            bar = "\r".join(f"Loading safetensors checkpoint shards: {100 * k // 64:3d}% Completed | {k}/64 "
                            f"[{k // 2:02d}:{k % 60:02d}<00:{(64 - k) % 60:02d}, 1.9s/it]"
                            for k in range(max(1, done - 3), done + 1))
            yield f"(VllmWorker TP{rng.randrange(8)} pid={4300 + rng.randrange(8)}) {bar}"
        elif kind < 15:
            yield (f"(VllmWorker TP{rng.randrange(8)} pid={4300 + rng.randrange(8)}) INFO {ts} "
                   f"[pynccl.py:69] vLLM is using nccl==2.26.2")
        elif kind < 17:
            yield (f"(EngineCore_DP0 pid=4242) INFO {ts} [core.py:75] Initializing a V1 LLM engine (v0.10.1) "
                   f"with config: model='{model}', dtype=torch.bfloat16, max_seq_len=32768, "
                   f"tensor_parallel_size=8, enable_prefix_caching=True")
        elif kind < 19:
            yield ("/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The "
                   "pynvml package is deprecated. Please install nvidia-ml-py instead.")
        else:
            for line in _RECOVERED:
                yield f"(EngineCore_DP0 pid=4242) WARNING {ts} [structured_output/__init__.py:120] {line}"


def bury(data: bytes, size: int = 2 * 1024 * 1024, seed: int = 0) -> bytes:
    """`data` with about `size` bytes of launch noise before it and a little after."""
    rng = random.Random(seed)
    step = [0]
    stream = _noise_lines(rng, step)
    before: list[str] = []
    total = 0
    while total < size:
        line = next(stream)
        before.append(line)
        total += len(line) + 1
    after = [next(stream) for _ in range(rng.randrange(0, 4))]
    body = data if data.endswith(b"\n") or not data else data + b"\n"
    return ("\n".join(before) + "\n").encode() + body + ("".join(f"{line}\n" for line in after)).encode()
