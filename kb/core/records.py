"""Typed results of the analysis core.

These records are the contract between the pure core and everything that calls it
(CLI, HTTP service, evaluation, storage). `Analysis.to_dict()` is the JSON shape that
`kb analyze --json` prints and `POST /analyze` returns; other tools read it, so keys
are only ever added, never renamed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# The kind of an error line that states no exception type (an ERROR record's text):
# the logger's copy of an error, untyped rather than of another type.
LOGGED_ERROR = "logged error"

PHASES = (
    "config",  # argument / config validation, before any process is spawned
    "startup",  # process start-up: device init, distributed init, imports
    "weight_loading",
    "kv_cache_profiling",
    "cuda_graph_capture",
    "serving",
    "training",
    "shutdown",
    "unknown",
)


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame. `file` is library-relative when the path is inside a package
    (`vllm/v1/worker/gpu_worker.py`), so the same frame compares equal across installs."""

    file: str
    function: str
    line: int | None = None
    code: str | None = None
    path: str | None = None  # the path as the log printed it


@dataclass(slots=True)
class ErrorEvent:
    """An error found in the log: a Python exception, a C++ terminate, a CUDA/NCCL
    error line, a signal or an OOM kill. `ranks` lists the processes that printed the
    same error (an occurrence group): every rank repeating it is one event."""

    exception: str
    message: str
    process: str | None = None
    frames: list[Frame] = field(default_factory=list)
    line_number: int | None = None  # 1-based line of the exception line in the input
    truncated: bool = False  # the exception line itself is missing from the log
    confidence: float = 0.0
    kind: str = "python"  # python | cpp | cuda | nccl | signal | oom_kill | log_error
    role: str = "root"  # root | symptom | cascade | confirmation | benign
    reason: str | None = None  # why the event got its role (shown to the user)
    ranks: list[str] = field(default_factory=list)

    @property
    def headline(self) -> str:
        """`Type: message` as printed; either part alone when the other is missing (a
        traceback whose exception line lost its type, a bare exception)."""
        return ": ".join(part for part in (self.exception, self.message) if part)


@dataclass(slots=True)
class Gpu:
    name: str | None = None
    count: int | None = None


@dataclass(slots=True)
class Parallel:
    tp: int | None = None
    dp: int | None = None
    pp: int | None = None
    ep: int | None = None


@dataclass(slots=True)
class Speculative:
    method: str | None = None
    draft_model: str | None = None
    num_speculative_tokens: int | None = None


@dataclass(slots=True)
class Context:
    """What the log says about where the crash happened. Unknown values stay None."""

    engine: str | None = None  # vllm | sglang | tensorrt-llm | tgi | pytorch | other
    engine_version: str | None = None
    model: str | None = None
    model_arch: str | None = None  # HF model_type, e.g. "kimi_k2"
    architecture: str | None = None  # HF architectures[0], e.g. "DeepseekV3ForCausalLM"
    dtype: str | None = None
    quantization: str | None = None
    gpu: Gpu = field(default_factory=Gpu)
    parallel: Parallel = field(default_factory=Parallel)
    speculative: Speculative = field(default_factory=Speculative)
    cuda_visible_devices: str | None = None
    torch_version: str | None = None
    cuda_version: str | None = None
    python_version: str | None = None
    hosts: list[str] = field(default_factory=list)  # named by the capture (syslog, journald), first seen first


@dataclass(frozen=True, slots=True)
class Hint:
    """Why one part of the crash did or did not count towards the fingerprint."""

    part: str  # "exception" | "message" | "frame"
    value: str
    contributes: bool
    hint: str


@dataclass(slots=True)
class Fingerprint:
    """Versioned crash identity: `hash` groups exactly, the normalized fields feed
    fuzzy matching. Never change the algorithm without bumping `version`."""

    version: str
    hash: str
    signature: str  # human-readable: "ValueError: No available memory for ... | f1 < f2"
    exception: str
    message_template: str
    frames: list[str] = field(default_factory=list)  # "vllm/worker/worker.py:load_model"
    hints: list[Hint] = field(default_factory=list)
    # The identity holds the kind alone (a crash signal whose crash site the log does not
    # show): shown similar incidents, never routed exactly nor called "known".
    weak: bool = False


@dataclass(slots=True)
class Timing:
    first_timestamp: str | None = None
    crash_timestamp: str | None = None
    seconds_to_crash: float | None = None


@dataclass(slots=True)
class Analysis:
    fingerprint: Fingerprint
    root_cause: ErrorEvent | None
    symptoms: list[ErrorEvent] = field(default_factory=list)
    context: Context = field(default_factory=Context)
    phase: str = "unknown"
    timing: Timing = field(default_factory=Timing)
    redactions: int = 0
    processes: list[str] = field(default_factory=list)
    lines: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)
    capture: list[str] = field(default_factory=list)  # capture layers peeled ("wrapped at 80")
    # found | not_captured (only wrappers: the cause is not in this log) | no_error
    verdict: str = "no_error"

    @property
    def identifies(self) -> bool:
        """Does it name the crash's cause? Only then may it be matched or grouped."""
        return self.verdict == "found"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class CrashFeatures:
    """The normalized fields that matching compares. The service stores them as
    indexed columns, so candidates can be loaded and scored without re-analysing logs."""

    exception: str
    message_template: str
    frames: list[str] = field(default_factory=list)
    engine: str | None = None
    engine_version: str | None = None
    model_arch: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    tp: int | None = None
    dp: int | None = None
    pp: int | None = None
    ep: int | None = None
    phase: str | None = None

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> CrashFeatures:
        ctx = analysis.context
        fp = analysis.fingerprint
        return cls(
            exception=fp.exception,
            message_template=fp.message_template,
            frames=list(fp.frames),
            engine=ctx.engine,
            engine_version=ctx.engine_version,
            model_arch=ctx.model_arch,
            gpu_name=ctx.gpu.name,
            gpu_count=ctx.gpu.count,
            tp=ctx.parallel.tp,
            dp=ctx.parallel.dp,
            pp=ctx.parallel.pp,
            ep=ctx.parallel.ep,
            phase=analysis.phase,
        )


@dataclass(slots=True)
class MatchScore:
    """How alike two crashes are (0-100), the tier that follows, and what counted."""

    score: float
    status: str  # known | similar | new
    explanation: list[str] = field(default_factory=list)
