"""Which engines' incidents hold for which crashes (kb.core.engines), and the analyzer
naming llama.cpp / ollama, DeepSpeed and Ray from their log markers."""

from __future__ import annotations

import pytest

from kb.core.analyze import analyze
from kb.core.engines import compatible, label_engine
from kb.core.recommend import FixEvidence, IncidentEvidence, Where, recommend


@pytest.mark.parametrize("a,b,expected", [
    ("vllm", "vllm", True), (None, "ray", True), ("other", "llama.cpp", True),
    ("deepspeed", "pytorch", True), ("pytorch", "deepspeed", True),
    ("ray", "vllm", True), ("sglang", "ray", True), ("ray", "pytorch", True),
    ("vllm", "sglang", False), ("llama.cpp", "pytorch", False), ("llama.cpp", "vllm", False),
    ("deepspeed", "vllm", False), ("ray", "tgi", False), ("ray", "llama.cpp", False),
])
def test_compatible(a, b, expected):
    assert compatible(a, b) is expected


def test_labels_call_llama_cpp_and_ray_other():
    assert [label_engine(e) for e in ("llama.cpp", "ray", "deepspeed", "vllm", None)] == \
        ["other", "other", "deepspeed", "vllm", None]


def _log(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def test_llama_cpp_deepspeed_and_ray_are_named_from_their_logs():
    llama = _log("llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors",
                 "llama_model_load: error loading model: unknown model architecture: 'foo'")
    assert analyze(llama).context.engine == "llama.cpp"
    ds = _log("[2025-03-01 10:00:00,000] [INFO] [real_accelerator.py:222:get_accelerator] Setting ds_accelerator to cuda (auto detect)",
              "  File \"/opt/conda/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py\", line 1, in barrier",
              "RuntimeError: boom")
    assert analyze(ds).context.engine == "deepspeed"
    ray = _log("(raylet) [2025-03-01 10:00:00,000 E 1234 1234] (raylet) node_manager.cc:3069: 1 Workers killed",
               "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.")
    assert analyze(ray).context.engine == "ray"
    vllm_on_ray = _log("INFO 03-01 10:00:00 [ray_utils.py:300] Waiting for creating a placement group of specs for 120 seconds.",
                       "(raylet) node_manager.cc:3069: 1 Workers killed", "from vllm.executor import ray_utils",
                       "ValueError: boom")
    assert analyze(vllm_on_ray).context.engine == "vllm"  # a serving engine outranks the layer it runs on


def test_a_deepspeed_incident_advises_a_crash_called_pytorch():
    fix = FixEvidence(1, "Lower the micro batch", "config", {"flags": ["--micro-batch 1"]}, worked=1)
    incident = IncidentEvidence(1, "ZeRO OOM", engine="deepspeed", fixes=[fix])
    assert recommend(incident, Where(engine="pytorch")).path == "patch"
    ray = IncidentEvidence(2, "object store full", engine="ray", fixes=[fix])
    assert recommend(ray, Where(engine="vllm")).path == "patch"
    llama = IncidentEvidence(3, "ggml assert", engine="llama.cpp", fixes=[fix])
    assert recommend(llama, Where(engine="vllm")).path == "investigate"
