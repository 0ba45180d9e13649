"""Host metadata: best effort, real executables, never an error."""

from __future__ import annotations

import socket

from client_helpers import GPU

from kb.client import hostinfo


def test_gpus_from_nvidia_smi_on_path(kb_env, monkeypatch):
    monkeypatch.setenv("PATH", kb_env["PATH"])  # a real fake nvidia-smi script comes first
    assert hostinfo.gpu_names() == [GPU, GPU]


def test_no_nvidia_smi_means_no_gpu_fields(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert hostinfo.gpu_names() == []
    info = hostinfo.collect(["true"], 0)
    assert "gpu" not in info.to_fields() and "gpu_count" not in info.to_fields()


def test_a_failing_or_hanging_nvidia_smi_is_ignored(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2\n"
                   "exit 9\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert hostinfo.gpu_names() == []
    smi.write_text("#!/bin/sh\nexec sleep 30\n")
    assert hostinfo.gpu_names(timeout=0.5) == []


def test_collect_and_fields(kb_env, monkeypatch):
    monkeypatch.setenv("PATH", kb_env["PATH"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("KB_REPORTER", "oncall")
    info = hostinfo.collect(["vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "a b"], 1, "exit")
    fields = info.to_fields()
    assert fields["command"] == "vllm serve Qwen/Qwen3-8B --served-model-name 'a b'"
    assert fields["exit_code"] == "1" and fields["failure"] == "exit"
    assert fields["host"] == socket.gethostname() and fields["reporter"] == "oncall"
    assert fields["gpu"] == GPU and fields["gpu_count"] == "2"
    assert fields["cuda_visible_devices"] == "2,3"
    assert info.to_dict()["gpu_count"] == 2


def test_engine_guess():
    assert hostinfo.guess_engine(["vllm", "serve", "m"], {"vllm": "0.10.1"}) == "vllm"
    assert hostinfo.guess_engine(["python", "-m", "sglang.launch_server"], {"vllm": "1", "sglang": "2"}) == "sglang"
    assert hostinfo.guess_engine(["torchrun", "train.py"], {"vllm": "0.10.1"}) == "vllm"
    assert hostinfo.guess_engine(["torchrun", "train.py"], {"vllm": "1", "sglang": "2"}) is None
    assert hostinfo.guess_engine(["docker", "run", "vllm/vllm-openai:v0.9.0"], {"vllm": "0.10.1"}) is None
    info = hostinfo.HostInfo(engine="vllm", versions={"vllm": "0.10.1", "torch": "2.7.1"})
    assert info.to_fields() == {"engine": "vllm", "engine_version": "0.10.1", "torch_version": "2.7.1"}
    assert hostinfo.HostInfo(engine="sglang", versions={}).to_fields() == {}


def test_most_common_gpu_name_wins():
    assert hostinfo.HostInfo(gpu_names=["A100", "H100", "H100"]).gpu == "H100"
