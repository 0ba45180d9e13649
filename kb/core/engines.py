"""The engines Crash KB knows and which of them run on which: one relation for the
matcher's engine gate (kb.core.match), the advice (kb.core.recommend) and the
evaluation against corpus labels (kb.core.evaluate). Pure.

The analyzer names an engine from its log markers (kb.core.context). Some engines are
layers of others, so one crash is rightly attributed to either:
- DeepSpeed (and Megatron-LM) training is torch.distributed training: a DeepSpeed run's
  CUDA OOM or NCCL timeout is the PyTorch incident, and a DeepSpeed incident holds for a
  log the analyzer calls `pytorch` (an excerpt without DeepSpeed's own lines).
- Ray schedules PyTorch (Ray Train), DeepSpeed, vLLM and SGLang workers (multi-node
  serving, Ray Serve LLM): a Ray failure (placement group, actor death, OOM-killer kill,
  object store, GCS/raylet) in such a deployment is the Ray incident, whichever engine
  the rest of the log names, and a vLLM-on-Ray incident holds for an excerpt that shows
  only Ray's lines.
llama.cpp (and ollama, which runs it) is an engine of its own: it runs on none of these.
`other` names no engine: it is compatible with every one, like an unknown engine."""

from __future__ import annotations

ENGINES = ("vllm", "sglang", "tensorrt-llm", "tgi", "llama.cpp", "pytorch", "deepspeed", "ray", "other")

# engine -> the engines it runs on or runs (both directions count)
_LAYERS: dict[str, frozenset[str]] = {
    "deepspeed": frozenset({"pytorch"}),
    "ray": frozenset({"pytorch", "deepspeed", "vllm", "sglang"}),
}

# Engines whose corpus label is `other` (shared/corpus/README.md lists no name for them).
LABELLED_OTHER = frozenset({"llama.cpp", "ray", "other"})


def _norm(engine: str | None) -> str | None:
    name = (engine or "").strip().lower()
    return None if name in ("", "other") else name


def compatible(a: str | None, b: str | None) -> bool:
    """Whether a crash attributed to engine `a` can be an incident of engine `b`: the
    same engine, one unknown (None or `other`), or one a layer of the other."""
    a, b = _norm(a), _norm(b)
    if a is None or b is None or a == b:
        return True
    return b in _LAYERS.get(a, ()) or a in _LAYERS.get(b, ())


def label_engine(engine: str | None) -> str | None:
    """The engine as the corpus labels it (llama.cpp and Ray cases are labelled `other`)."""
    name = (engine or "").strip().lower() or None
    return "other" if name in LABELLED_OTHER else name
