"""Where the crash happened: engine and version, model and architecture, GPUs, topology,
speculative decoding, versions of torch/CUDA, the phase and the time to crash.

Each field keeps the first value the log states (launch arguments come first); a value
found in the root cause's own message (e.g. "tensor parallel size (8)") fills gaps."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from kb.core.lazyre import LazyPattern, lazy
from kb.core import lazyre, patterns as P
from kb.core import scan
from kb.core.records import Context, ErrorEvent
from kb.core.split import LogLine


def _r(pattern: str, flags: int = 0) -> LazyPattern:
    return lazy(pattern, flags)


_NUM = r"['\"]?\s*[:=]?\s*['\"]?(\d+)"
# (field, literals one of which the line must hold, pattern) in priority order; group 1 is
# the value. The literal test is what keeps a kept line from running every pattern.
FIELD_PATTERNS: tuple[tuple[str, tuple[str, ...], LazyPattern], ...] = (
    ("engine_version:vllm", ('vLLM API server version',), _r(r"vLLM API server version v?(\d+\.\d+[\w.+-]*)")),
    ("engine_version:vllm", ('LLM engine (v',), _r(r"Initializing an? (?:V[01] )?LLM engine \(v(\d+\.\d+[\w.+-]*)\)")),
    # "vllm==0.11.0", "vllm version 0.11.0", "vllm: 0.11.0" (check_env), "vllm   0.11.0" (pip list)
    ("engine_version:vllm", ('vllm', 'vLLM', 'VLLM'), _r(r"\bvllm(?:==|:\s*| version:? |\s{2,}|-)v?(\d+\.\d+\.\d+[\w.+-]*)", re.I)),
    ("engine_version:sglang", ('sglang', 'SGLang', 'SGLANG'), _r(r"\bsglang(?:==|:\s*| version:? |\s{2,}|-)v?(\d+\.\d+\.\d+[\w.+-]*)", re.I)),
    ("engine_version:tensorrt-llm", ('TensorRT-LLM version',), _r(r"TensorRT-LLM version:? v?(\d+\.\d+[\w.+-]*)")),
    ("engine_version:tgi", ('text-generation', 'text_generation'), _r(r"text[-_]generation[-_](?:launcher|inference)[ /:]+v?(\d+\.\d+\.\d+)")),
    ("model", ('non-default args',), _r(r"non-default args: \{.*?'model': '([^']+)'")),
    ("model", ("model='",), _r(r"(?:^|[\s(,])model='([^']+)'")),
    ("model", ("model_path='",), _r(r"model_path='([^']+)'")),
    ("model", ('--model',), _r(r"(?:--model(?:-path|-id)?|--model_name_or_path)[= ]+['\"]?([^\s'\"]+)")),
    ("model", ('model_id:',), _r(r"model_id: \"([^\"]+)\"")),
    ("model", ('vllm serve',), _r(r"vllm serve ([^\s-][^\s]*)")),
    ("architecture", ('Resolved architecture',), _r(r"Resolved architecture: (\w+)")),
    # a config's own `"architectures": [...]`, not an error's list of the supported ones
    ("architecture", ('architectures',), _r(r"(?<!upported )['\"]?architectures['\"]?\s*[:=]\s*\[\s*['\"](\w+)['\"]")),
    ("architecture", ('Model architectures',), _r(r"Model architectures \['(\w+)'\]")),
    ("architecture", ('type=',), _r(r"\btype=(\w+For(?:CausalLM|ConditionalGeneration))")),
    ("model_arch", ('model_type',), _r(r"['\"]?model_type['\"]?\s*[:=]\s*['\"]?([a-z][\w-]*)")),
    ("dtype", ('dtype',), _r(r"(?:\bdtype=|'dtype': |--dtype[= ])(?:torch\.)?['\"]?(\w+)")),
    ("quantization", ('quantization',), _r(r"(?:\bquantization=|'quantization': |--quantization[= ])['\"]?(\w+)")),
    ("tp", ('tensor_parallel_size',), _r(r"tensor_parallel_size" + _NUM)),
    ("tp", ('--tensor-parallel-size', '--tp', 'tp_size', '--num-shard'), _r(r"(?:--tensor-parallel-size|--tp-size|--tp|\btp_size|--num-shard)[= ]+(\d+)")),
    ("tp", ('tensor parallel size',), _r(r"tensor parallel size \((\d+)\)")),
    ("tp", ('num_shard: Some',), _r(r"num_shard: Some\((\d+)\)")),
    ("tp", ('`num_shards`',), _r(r"`num_shards`: (\d+)")),
    ("dp", ('data_parallel_size',), _r(r"data_parallel_size" + _NUM)),
    ("dp", ('--data-parallel-size', '--dp', 'dp_size'), _r(r"(?:--data-parallel-size|--dp-size|--dp|\bdp_size)[= ]+(\d+)")),
    ("pp", ('pipeline_parallel_size',), _r(r"pipeline_parallel_size" + _NUM)),
    ("pp", ('--pipeline-parallel-size', '--pp-size', 'pp_size'), _r(r"(?:--pipeline-parallel-size|--pp-size|\bpp_size)[= ]+(\d+)")),
    ("ep", ('expert_parallel_size', 'ep_size', '--ep-size', '--expert-parallel-size'), _r(r"(?:expert_parallel_size|\bep_size|--ep-size|--expert-parallel-size)" + _NUM)),
    ("enable_ep", ('enable_expert_parallel', '--enable-expert-parallel'), _r(r"(?:enable_expert_parallel['\"]?\s*[:=]\s*True|--enable-expert-parallel)")),
    ("spec_method", ('method',), _r(r"""['"]method['"]\s*:\s*['"](\w+)['"]""")),
    ("spec_method", ('--speculative-algorithm',), _r(r"--speculative-algorithm[= ](\w+)")),
    ("spec_draft", ('speculative_config',), _r(r"""speculative_config[^\n]*?['"]model['"]\s*:\s*['"]([^'"]+)['"]""")),
    ("spec_draft", ('--speculative-draft-model-path',), _r(r"--speculative-draft-model-path[= ](\S+)")),
    ("spec_tokens", ('num_speculative_tokens',), _r(r"""['"]num_speculative_tokens['"]\s*:\s*(\d+)""")),
    ("cuda_visible_devices", ('CUDA_VISIBLE_DEVICES',), _r(r"CUDA_VISIBLE_DEVICES['\"]?\s*[=:]\s*['\"]?([\d,]+)")),
    ("torch_version", ('PyTorch', 'torch'), _r(r"(?:PyTorch(?: version)?\s*:|\btorch(?:==|:| version:? |\s))\s*v?(\d+\.\d+\.\d+[\w.+]*)")),
    ("cuda_version", ('CUDA Version', 'CUDA used', 'cuda', 'CUDA'), _r(r"(?:CUDA Version\s*:|CUDA used to build PyTorch\s*:|cuda(?:==| version:? ))\s*(\d+\.\d+)", re.I)),
    ("python_version", ('Python',), _r(r"^Python(?: version)?\s*:\s*(3\.\d+(?:\.\d+)?)")),
    ("python_version", ('/python3',), _r(r"/lib(?:64)?/python(3\.\d+)/")),
    ("gpu_count", ('--nproc', '--gpus', 'world_size'), _r(r"(?:(?:--nproc[_-]per[_-]node|--gpus)[= ]+|\bworld_size\s*[=:]\s*)(\d+)")),
    ("gpu_list", ('GPU ',), _r(r"^GPU ((?:\d+,)*\d+): ")),
)

_GPU = _r(
    r"\b((?:NVIDIA|Tesla|Quadro|AMD Instinct)\s(?:GeForce\s)?(?:RTX\s|GTX\s)?(?:PRO\s)?[A-Z]?\d*[A-Z]*\d*\w*"
    r"(?:[- ](?:\d+GB|HBM\d\w*|PCIe|SXM\d?\w*|NVL|Ti|Blackwell|Server|Workstation|Edition|Max-Q|D|Ada|Generation|\d{4}))*)"
)
# A GPU name holds a model token after its brand (T4, H100, RTX 4090, MI300X, TITAN): the
# brand before other words is the vendor ("NVIDIA driver", "NVIDIA Corporation Device").
_GPU_MODEL = _r(r"\s(?:[A-Z]{0,3}\d|[A-Z]{4,}\b)")
_GPU_INDEX = _r(r"\|\s+(\d+)\s+NVIDIA|GPU (\d+): NVIDIA")

_ENGINE_MARKERS: tuple[tuple[str, LazyPattern], ...] = (
    ("tensorrt-llm", _r(r"tensorrt_llm|TensorRT-LLM|\[TRT\]|tensorrtllm")),
    ("tgi", _r(r"text_generation_server|text_generation_launcher|text-generation-launcher|text_generation_router|ShardCannotStart")),
    ("sglang", _r(r"\bsglang\b|sgl_kernel|sgl-workspace|scheduler_process|SGLang")),
    ("vllm", _r(r"\bvllm\b|vLLM|EngineCore|VllmWorker|Worker_TP|VLLM_|gpu_memory_utilization|max_model_len")),
    ("llama.cpp", _r(r"llama_model_load|llm_load_|ggml_|GGML_ASSERT|gguf_init|llama-server|llama_server|llama-cli|\bollama\b|llama runner")),
    # DeepSpeed and Megatron-LM training (kb.core.engines: they run on torch.distributed)
    ("deepspeed", _r(r"deepspeed|DeepSpeed|ds_accelerator|megatron|Megatron|ZeRORuntimeException")),
    # Ray core, Ray Train / Serve / Data (kb.core.engines: beneath vLLM, SGLang, torch)
    ("ray", _r(r"\bray::|raylet|gcs_server|\bray\.exceptions|\bray\._private|\bray/_private|\bray/train|\bray/serve|\bray\.init"
               r"|RayActorError|RayTaskError|ActorDiedError|ObjectStoreFullError|RayTrainWorker|ServeReplica|ServeController|\bRAY_|\bray start\b")),
    ("pytorch", _r(r"torchrun|import torch\b|torch\.distributed|\[rank\d+\]:|^rank\d+$|ChildFailedError|ProcessGroupNCCL|\.backward\(|local_rank|accelerate|transformers/trainer|llamafactory")),
)
# A path up to the directory packages are installed in, or the interpreter's library: the
# environment's name is the user's choice ("/root/.python/vllm/lib/python3.10/site-packages/
# deepspeed/...", "/home/x/llava-vllm/env/lib/python3.10/threading.py")
_INSTALL_DIR = lazyre.compile(r"[^\s\"'(]*?[/\\](?:(?:site|dist)-packages|lib[/\\]python\d[\d.]*)[/\\]")
_ENGINE_PRIORITY = {"tensorrt-llm": 6, "tgi": 5, "sglang": 4, "vllm": 3, "llama.cpp": 2, "deepspeed": 1, "ray": 0, "pytorch": -1}
# Engines other engines run on or that run them (kb.core.engines): named only when no
# serving engine shows (every engine's log mentions torch, vLLM's multi-node logs Ray),
# plain torch only when neither DeepSpeed nor Ray shows either.
_LAYER_ENGINES = ("deepspeed", "ray")
# Literals that any match of each engine's marker needs (a cheap test before the regex).
_ENGINE_LITERALS: dict[str, tuple[str, ...]] = {
    "tensorrt-llm": ("tensorrt_llm", "TensorRT-LLM", "[TRT]", "tensorrtllm"),
    "tgi": ("text_generation", "text-generation", "ShardCannotStart"),
    "sglang": ("sglang", "sgl_kernel", "sgl-workspace", "scheduler_process", "SGLang"),
    "vllm": ("vllm", "vLLM", "EngineCore", "VllmWorker", "Worker_TP", "VLLM_", "gpu_memory_utilization", "max_model_len"),
    "llama.cpp": ("llama_model_load", "llm_load_", "ggml_", "GGML_ASSERT", "gguf_init", "llama-server", "llama_server",
                  "llama-cli", "ollama", "llama runner"),
    "deepspeed": ("deepspeed", "DeepSpeed", "ds_accelerator", "megatron", "Megatron", "ZeRORuntimeException"),
    "ray": ("ray::", "raylet", "gcs_server", "ray.", "ray/", "RayActorError", "RayTaskError", "ActorDiedError",
            "ObjectStoreFullError", "RayTrainWorker", "ServeReplica", "ServeController", "RAY_", "ray start"),
    "pytorch": ("torchrun", "torch.distributed", "rank", "ChildFailedError", "import torch", "ProcessGroupNCCL", ".backward(",
                "accelerate", "transformers/trainer", "llamafactory"),
}
# literal -> indices of the FIELD_PATTERNS that need it: each literal is looked for once a line
_FIELD_LITERALS: dict[str, tuple[int, ...]] = {}
for _index, (_name, _literals, _pattern) in enumerate(FIELD_PATTERNS):
    for _literal in _literals:
        _FIELD_LITERALS[_literal] = (*_FIELD_LITERALS.get(_literal, ()), _index)
_GPU_LITERALS = ("NVIDIA", "Tesla", "Quadro")

# Every literal a line is tested for, found in one pass: what each one means. Phase
# anchors of a pattern that ignores case are found in any case (a separate entry).
_CASE_SENSITIVE = sorted({*_FIELD_LITERALS, *_GPU_LITERALS,
                          *(literal for literals in _ENGINE_LITERALS.values() for literal in literals),
                          *(a for rule in P.PHASE_MARKERS if not rule.pattern.flags & re.I for a in rule.anchors)})
_CASELESS = sorted({a for rule in P.PHASE_MARKERS if rule.pattern.flags & re.I for a in rule.anchors})
_ENTRIES = [(a, False) for a in _CASE_SENSITIVE] + [(a, True) for a in _CASELESS]
_FIELDS_OF = [() if caseless else _FIELD_LITERALS.get(a, ()) for a, caseless in _ENTRIES]
_ENGINES_OF = [() if caseless else tuple(name for name, literals in _ENGINE_LITERALS.items() if a in literals)
               for a, caseless in _ENTRIES]
_IS_GPU = [not caseless and a in _GPU_LITERALS for a, caseless in _ENTRIES]
_PHASES_OF = [frozenset(n for n, rule in enumerate(P.PHASE_MARKERS)
                        if a in rule.anchors and caseless == bool(rule.pattern.flags & re.I))
              for a, caseless in _ENTRIES]
# What the pre-filter must let through for the context (kb.core.scan): every literal
# above, a caseless one in the forms a log prints it.
CONTEXT_LITERALS: tuple[str, ...] = tuple(sorted({form for a, caseless in _ENTRIES
                                                  for form in ((a, a.capitalize(), a.upper()) if caseless else (a,))}))
_LINE_SCAN = scan.LiteralSet([a for a, _ in _ENTRIES],
                              caseless=frozenset(n for n, (_, caseless) in enumerate(_ENTRIES) if caseless))

_UNSET = frozenset({"None", "null", "none", "auto"})

# A package inventory (collect_env's `[pip3] sglang==0.4.6`, pip freeze) lists what is
# installed, not what ran: no engine evidence.
_INVENTORY = _r(r"^\s*(?:\[(?:pip3?|conda)\]\s|[A-Za-z][\w.-]*==\d)")
# An aside in a message: an example or a pointer, not what failed.
_ASIDE = _r(r"\((?:e\.g\.|i\.e\.|for example|such as|see )[^)]*\)")

# "Qwen3MoeForCausalLM" -> "qwen3_moe"
_ARCH_SUFFIX = lazyre.compile(r"(?:ForCausalLM|ForConditionalGeneration|LMHeadModel|ForSequenceClassification|Model)$")


# "vllm/model_executor/models/llama.py", "custom_modeling/flash_llama_modeling.py",
# "transformers/models/qwen2/modeling_qwen2.py" -> the model_type the code is for
# (TGI's `models/flash_causal_lm.py`, `seq2seq_lm.py` run every architecture: not one)
_MODEL_FILE = lazyre.compile(r"(?:/models/|custom_modeling/)(?:flash_)?(?!utils|registry|interfaces|config|__init__|layers|\w*(?:causal|seq2seq)_lm\.py$)([a-z][a-z0-9_]*?)(?:_modeling)?\.py$|/models/[a-z][a-z0-9_]*/modeling_([a-z][a-z0-9_]*)\.py$")
# TGI names a few modules after a model's former or family name, not its model_type; vLLM's
# deepseek_v2.py runs DeepSeek-V2, V3 and V3.2 alike: None, the module does not say which
_MODULE_MODEL_TYPE = {"rw": "falcon", "neox": "gpt_neox", "santacoder": "gpt_bigcode", "deepseek_v2": None}


def arch_from_frames(files: list[str]) -> str | None:
    for path in reversed(files):
        match = _MODEL_FILE.search(path)
        if match:
            name = match.group(1) or match.group(2)
            return _MODULE_MODEL_TYPE.get(name, name)
    return None


def arch_to_model_type(architecture: str) -> str | None:
    stem = _ARCH_SUFFIX.sub("", architecture)
    if not stem:
        return None
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", stem).lower()
    return re.sub(r"_v_?(\d)", r"_v\1", snake)


@dataclass
class ContextCollector:
    values: dict[str, str] = field(default_factory=dict)
    engine_hits: dict[str, int] = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    gpu_indices: set[str] = field(default_factory=set)
    phase_markers: list[tuple[int, str]] = field(default_factory=list)
    first_timestamp: str | None = None
    timestamps: list[tuple[int, str]] = field(default_factory=list)
    phases_seen: set = field(default_factory=set)
    engine_lines: int = 0
    process_engines: dict[str, frozenset[str]] = field(default_factory=dict)

    def feed(self, line: LogLine) -> None:
        body = line.body
        if line.host and len(self.hosts) < 16 and line.host not in self.hosts:
            self.hosts.append(line.host)
        if line.timestamp:
            if self.first_timestamp is None:
                self.first_timestamp = line.timestamp
            self.note_time(line.number, line.timestamp)
        if line.engine and self.engine_hits.get(line.engine, 0) < 50:
            self.engine_hits[line.engine] = self.engine_hits.get(line.engine, 0) + 1
        found = _LINE_SCAN.present(body)
        if self.engine_lines < 150 and not _INVENTORY.match(body):  # the engine is plain long before that
            self.engine_lines += 1
            # Whose marker the process name matches is known after its first line; the
            # body is searched only for a marker one of whose literals it holds (every
            # match holds one: tested for each marker in test_patterns).
            by_process = self._process_engines(line.process) if line.process else ()
            in_body = {name for i in found for name in _ENGINES_OF[i]}
            # where a package is installed (a virtualenv named "vllm") is not what ran
            marked = _INSTALL_DIR.sub("", body) if in_body and ("-packages" in body or "/python" in body) else body
            # a logger's target names the crate or module that printed (Rust tracing's
            # "text_generation_launcher"): the engine's, like a process name
            target = line.source if line.header else None
            for name, pattern in _ENGINE_MARKERS:
                if name in by_process or (name in in_body and pattern.search(marked)) or (target and pattern.search(target)):
                    self.engine_hits[name] = self.engine_hits.get(name, 0) + 1
        for index in sorted({index for i in found for index in _FIELDS_OF[i]}):
            name, _, pattern = FIELD_PATTERNS[index]
            if name in self.values:
                continue
            match = pattern.search(body)
            if match and (value := match.group(1) if match.groups() else "1") not in _UNSET:
                self.values[name] = value  # an argument dump's `quantization=None` says nothing yet
        if any(_IS_GPU[i] for i in found) and len(self.gpus) < 64:
            for match in _GPU.finditer(body):
                name = match.group(1).strip()
                if _GPU_MODEL.search(name):
                    self.gpus.append(name)
            index = _GPU_INDEX.search(body)
            if index:
                self.gpu_indices.add(index.group(1) or index.group(2))
        staged = body
        if line.dropped:  # a progress bar cut from the line's head still says the stage
            staged = f"{line.dropped}\n{body}"
            found = found + _LINE_SCAN.present(line.dropped)
        phases = {n for i in found for n in _PHASES_OF[i]} if len(self.phases_seen) < len(P.PHASE_MARKERS) else ()
        for n, rule in enumerate(P.PHASE_MARKERS) if phases else ():
            if n in phases and rule.phase not in self.phases_seen and rule.pattern.search(staged):
                self.phases_seen.add(rule.phase)  # stages only move forward: the first sighting is enough
                self.phase_markers.append((line.number, rule.phase or "unknown"))
                break

    def _process_engines(self, process: str) -> frozenset[str]:
        """The engines whose marker matches a process name (a log has a few names)."""
        engines = self.process_engines.get(process)
        if engines is None:
            engines = self.process_engines[process] = frozenset(
                name for name, pattern in _ENGINE_MARKERS if pattern.search(process))
        return engines

    def note_time(self, number: int, timestamp: str) -> None:
        """Line `number` was logged at `timestamp` (lines come in order)."""
        if self.timestamps and number <= self.timestamps[-1][0]:
            return
        if len(self.timestamps) < 4096 or number - self.timestamps[-1][0] > 1000:
            self.timestamps.append((number, timestamp))

    # ------------------------------------------------------------------------------------
    def build(self, root: ErrorEvent | None, frames_text: str, frame_files: list[str] | None = None) -> Context:
        v = self.values
        context = Context(hosts=list(self.hosts))
        context.engine = self._engine(frames_text, root)
        version = None
        if context.engine:
            version = v.get(f"engine_version:{context.engine}")
        context.engine_version = version
        context.model = v.get("model")
        context.architecture = v.get("architecture")
        context.model_arch = (v.get("model_arch") or (arch_to_model_type(context.architecture) if context.architecture else None)
                              or arch_from_frames(frame_files or []))
        context.dtype = v.get("dtype")
        context.quantization = v.get("quantization") if v.get("quantization") not in (None, "None") else None
        context.parallel.tp = _int(v.get("tp"))
        context.parallel.dp = _int(v.get("dp"))
        context.parallel.pp = _int(v.get("pp"))
        context.parallel.ep = _int(v.get("ep"))
        if context.parallel.ep is None and "enable_ep" in v and context.parallel.tp:
            context.parallel.ep = context.parallel.tp * (context.parallel.dp or 1)
        context.speculative.method = v.get("spec_method")
        context.speculative.draft_model = v.get("spec_draft")
        context.speculative.num_speculative_tokens = _int(v.get("spec_tokens"))
        context.cuda_visible_devices = v.get("cuda_visible_devices")
        context.torch_version = v.get("torch_version")
        context.cuda_version = v.get("cuda_version")
        context.python_version = v.get("python_version")
        if self.gpus:
            context.gpu.name = max(set(self.gpus), key=self.gpus.count)
        listed = len(v["gpu_list"].split(",")) if "gpu_list" in v else 0
        context.gpu.count = _int(v.get("gpu_count")) or (max(listed, len(self.gpu_indices)) or None)
        if context.gpu.count is None and context.cuda_visible_devices:
            context.gpu.count = len([d for d in context.cuda_visible_devices.split(",") if d.strip()])
        if context.gpu.count is None and context.parallel.tp:
            context.gpu.count = context.parallel.tp * (context.parallel.dp or 1) * (context.parallel.pp or 1)
        return context

    def _engine(self, frames_text: str, root: ErrorEvent | None = None) -> str | None:
        hits = dict(self.engine_hits)
        if root is not None:
            for rule in P.ENGINE_MESSAGES:
                if rule.engine and rule.pattern.search(root.message):
                    hits[rule.engine] = hits.get(rule.engine, 0) + 3
        frames_text = _INSTALL_DIR.sub("", frames_text)  # what ran, not where it was installed
        for name, pattern in _ENGINE_MARKERS:
            if pattern.search(frames_text):
                hits[name] = hits.get(name, 0) + 5
        if not hits:
            return None
        # By weight of evidence: the engine the log shows most; DeepSpeed or Ray only when
        # no serving engine shows, plain torch only when none of them does
        specific = {name: count for name, count in hits.items() if name != "pytorch" and name not in _LAYER_ENGINES and count}
        if not specific:
            specific = {name: count for name, count in hits.items() if name in _LAYER_ENGINES and count}
        if not specific:
            return "pytorch" if hits.get("pytorch") else None
        return max(specific, key=lambda name: (specific[name], _ENGINE_PRIORITY[name]))

    def phase(self, root: ErrorEvent | None, crash_line: int | None, engine: str | None,
              other_frames: list | None = None, quoting_frames: list | None = None) -> str:
        """The root cause's own frames say it best (for an error quoted in another's
        exception line, the frames of that traceback: where its caller waited for it), then
        its message, then the frames of another traceback in the log, then how far the
        launch got (stage markers)."""
        if root is not None:
            found = self._phase_from_frames(root.frames or quoting_frames or [], engine)
            if found:
                return found
            message = _ASIDE.sub("", root.message)  # "(e.g., CUDA Graphs)" names no phase
            for pattern, phase in P.MESSAGE_PHASES:
                if pattern.search(message) or pattern.search(root.exception):
                    return phase
            found = self._phase_from_frames(other_frames or [], engine)
            if found:
                return found
        stage_order = ["startup", "weight_loading", "kv_cache_profiling", "cuda_graph_capture", "training", "serving"]
        # "startup" counts wherever it was printed: the earliest stage, it only says the
        # launch had begun, or (printed after the crash) that it never finished
        reached = [phase for number, phase in self.phase_markers
                   if crash_line is None or number <= crash_line or phase == "startup"]
        if reached:
            return max(reached, key=stage_order.index)
        if engine in ("pytorch", "deepspeed"):  # DeepSpeed / Megatron runs are torch training
            return "training"
        # No stage marker, not even the launch's: an excerpt that does not say when
        return "unknown"

    @staticmethod
    def _phase_from_frames(frames: list, engine: str | None) -> str | None:
        for frame in reversed(frames):
            for pattern, phase in P.FRAME_PHASES:
                if pattern.search(frame.function) or (phase == "config" and pattern.search(frame.file)):
                    if phase == "training" and engine not in (None, "pytorch", "deepspeed", "ray"):
                        continue
                    return phase
        if len(frames) > 1 and all(frame.function == "<module>" for frame in frames) or any(
                outer.function == inner.function == "<module>" for outer, inner in zip(frames, frames[1:])):
            # module-level code importing a module: it failed while importing (one frame of a
            # script's own body, a launcher's entry point most often, says nothing of when)
            return "startup"
        return None

    def seconds_to_crash(self, crash_line: int | None) -> tuple[str | None, str | None, float | None]:
        if self.first_timestamp is None:
            return None, None, None
        crash_ts = None
        for number, ts in self.timestamps:
            if crash_line is not None and number > crash_line:
                break
            crash_ts = ts
        first, last = parse_time(self.first_timestamp), parse_time(crash_ts) if crash_ts else None
        seconds = (last - first).total_seconds() if first and last else None
        if seconds is not None and seconds < 0:
            seconds = None
        return self.first_timestamp, crash_ts, seconds


# (shape, strptime format): the shape picks the format to try, since a failing strptime
# costs ~20 us (a vLLM "02-22 17:51:00" behind seven ISO formats cost 150 us).
_TIME_FORMATS = tuple((lazyre.compile(shape), fmt) for shape, fmt in (
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$", "%Y-%m-%dT%H:%M:%S.%fZ"),
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", "%Y-%m-%dT%H:%M:%SZ"),
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+$", "%Y-%m-%dT%H:%M:%S.%f"),
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$", "%Y-%m-%dT%H:%M:%S"),
    (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+$", "%Y-%m-%d %H:%M:%S,%f"),
    (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+$", "%Y-%m-%d %H:%M:%S.%f"),
    (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", "%Y-%m-%d %H:%M:%S"),
    (r"\d\d-\d\d \d\d:\d\d:\d\d$", "%m-%d %H:%M:%S"),
    (r"\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d$", "%m/%d/%Y-%H:%M:%S"),
    (r"\d{4} \d\d:\d\d:\d\d\.\d+$", "%m%d %H:%M:%S.%f"),
))


def parse_time(text: str) -> datetime | None:
    text = text.strip()
    if re.match(r"^\d{3} \d\d:", text):  # glog "E114 09:07:08": month without its leading zero
        text = "0" + text
    if len(text) > 26 and "." in text:  # nanoseconds: datetime takes microseconds
        head, _, tail = text.partition(".")
        text = f"{head}.{tail[:6]}{'Z' if text.endswith('Z') else ''}"
    for shape, fmt in _TIME_FORMATS:
        if shape.match(text):
            try:
                return datetime.strptime(text, fmt)
            except ValueError:  # the shape fits, the values do not (month 13)
                return None
    return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
