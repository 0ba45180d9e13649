"""Context by weight of evidence: the engine the log shows most, the phase from the
frames nearest the raise, never from words in an aside or from a process's entry frame."""

from kb.core.analyze import analyze

VLLM_WORKER = """\
INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1
INFO 05-01 12:00:01 [core.py:2] Initializing a V1 LLM engine (v0.9.1) with config: model='Qwen/Qwen3-8B'
(VllmWorker rank=0 pid=101) INFO 05-01 12:00:05 [gpu_model_runner.py:3] Starting to load model Qwen/Qwen3-8B...
(VllmWorker rank=0 pid=101) ERROR 05-01 12:00:09 [multiproc_executor.py:4] Traceback (most recent call last):
(VllmWorker rank=0 pid=101) ERROR 05-01 12:00:09 [multiproc_executor.py:4]   File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap
(VllmWorker rank=0 pid=101) ERROR 05-01 12:00:09 [multiproc_executor.py:4]     self.run()
(VllmWorker rank=0 pid=101) ERROR 05-01 12:00:09 [multiproc_executor.py:4]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 500, in worker_main
(VllmWorker rank=0 pid=101) ERROR 05-01 12:00:09 [multiproc_executor.py:4]     worker.do_something()
(VllmWorker rank=0 pid=101) ERROR 05-01 12:00:09 [multiproc_executor.py:4] KeyError: 'model.layers.0.mlp.experts.w13_weight'
"""

ENV_DUMP = """\
Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] sglang==0.4.6.post1
[pip3] torch==2.7.0
[pip3] vllm==0.9.1
[conda] Could not collect
"""


def test_an_installed_package_list_is_no_engine_evidence():
    result = analyze((ENV_DUMP + VLLM_WORKER).encode())
    assert result.context.engine == "vllm"


def test_a_process_entry_frame_names_no_phase():
    """The crash is below `_bootstrap` in every worker: the stage the launch reached says
    where it failed (here: loading weights)."""
    result = analyze(VLLM_WORKER.encode())
    assert result.root_cause.exception == "KeyError"
    assert result.phase == "weight_loading"


def _v0_engine_traceback(*inner: tuple[str, str]) -> bytes:
    """A V0 engine's traceback through its construction (`from_engine_args`, the executor),
    with `inner` (file, function) frames nearer the raise."""
    frames = [("vllm/engine/multiprocessing/engine.py", "run_mp_engine"),
              ("vllm/engine/multiprocessing/engine.py", "from_engine_args"),
              ("vllm/executor/ray_distributed_executor.py", "_init_executor"), *inner]
    lines = ["ERROR 02-09 02:31:11 engine.py:389] Traceback (most recent call last):"]
    for n, (file, function) in enumerate(frames):
        lines += [f'ERROR 02-09 02:31:11 engine.py:389]   File "/usr/local/lib/python3.12/dist-packages/{file}", '
                  f"line {100 + n}, in {function}", "ERROR 02-09 02:31:11 engine.py:389]     step()"]
    lines.append("ERROR 02-09 02:31:11 engine.py:389] ValueError: the crash")
    return ("\n".join(lines) + "\n").encode()


def test_setting_up_the_ray_cluster_is_startup_unless_a_frame_nearer_the_raise_says_more():
    assert analyze(_v0_engine_traceback(("vllm/executor/ray_utils.py", "initialize_ray_cluster"))).phase == "startup"
    assert analyze(_v0_engine_traceback(("vllm/worker/model_runner.py", "load_model"),
                                        ("vllm/model_executor/models/llama.py", "load_weights"))).phase == "weight_loading"


def test_an_aside_in_the_message_names_no_phase():
    log = ("INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
           "of 79.19 GiB of which 1.10 GiB is free. Of the allocated memory 75.1 GiB is allocated by PyTorch, "
           "and 1.2 GiB is reserved by PyTorch but unallocated (e.g., CUDA Graphs).\n")
    assert analyze(log.encode()).phase != "cuda_graph_capture"


def test_the_hosts_the_capture_names_are_kept():
    log = ("May 01 12:00:00 gpu-node-3 vllm[4242]: INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1\n"
           "May 01 12:00:09 gpu-node-7 vllm[4243]: ValueError: bad config\n")
    assert analyze(log.encode()).context.hosts == ["gpu-node-3", "gpu-node-7"]


def test_deepspeeds_own_record_format_names_the_engine():
    """DeepSpeed's logger prints `[time] [LEVEL] [file:line:function]`: its records say
    whose log this is even where no line names DeepSpeed."""
    log = ("[2023-04-20 19:03:19,578] [INFO] [utils.py:831:see_memory_usage] After creating fp32 partitions\n"
           "[2023-04-20 19:03:19,581] [INFO] [utils.py:840:see_memory_usage] CPU Virtual Memory:  used = 29.71 GB, percent = 95.3%\n")
    assert analyze(log.encode()).context.engine == "deepspeed"


def test_the_supported_architectures_an_error_lists_are_not_the_models_own():
    log = (b"ValueError: Model architectures ['Qwen3NextForCausalLM'] are not supported for now. "
           b"Supported architectures: ['AquilaModel', 'AquilaForCausalLM', 'BaichuanForCausalLM']\n")
    context = analyze(log).context
    assert context.architecture == "Qwen3NextForCausalLM"
    assert context.model_arch == "qwen3_next"


def _tgi_shard_traceback(*modules: str) -> bytes:
    lines = ["Traceback (most recent call last):"]
    for n, module in enumerate(modules):
        lines += [f'  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/models/{module}", '
                  f"line {100 + n}, in forward", "    return self.model.forward(batch)"]
    lines.append("RuntimeError: CUDA error: an illegal memory access was encountered")
    return ("\n".join(lines) + "\n").encode()


def test_a_runner_module_for_every_architecture_names_none():
    """TGI's `flash_causal_lm.py` runs every model: the architecture is the modeling file's."""
    assert analyze(_tgi_shard_traceback("custom_modeling/flash_llama_modeling.py", "flash_causal_lm.py")).context.model_arch == "llama"
    assert analyze(_tgi_shard_traceback("flash_causal_lm.py", "seq2seq_lm.py")).context.model_arch is None
    assert analyze(_tgi_shard_traceback("custom_modeling/flash_rw_modeling.py")).context.model_arch == "falcon"


def test_allocating_the_kv_cache_is_the_kv_cache_phase():
    assert analyze(_v0_engine_traceback(("vllm/v1/worker/gpu_worker.py", "initialize_from_config"),
                                        ("vllm/v1/worker/gpu_model_runner.py", "_allocate_kv_cache_tensors"))
                   ).phase == "kv_cache_profiling"


def test_an_index_out_of_bounds_assert_names_no_phase_but_the_frames_do():
    """A device-side assert's text says which index, not when: the engine step's frames
    in the log say it was serving."""
    log = ("/tmp/inductor/cx.py:37: unknown: block: [12,0,0], thread: [5,0,0] Assertion `index out of bounds: "
           "0 <= tmp4 < 2048` failed.\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 652, in run_busy_loop\n'
           "    self._process_engine_step()\n"
           '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 677, in _process_engine_step\n'
           "    outputs, model_executed = self.step_fn()\n")
    result = analyze(log.encode())
    assert result.root_cause.exception == "CUDA device-side assert"
    assert result.phase == "serving"


def test_a_model_module_that_runs_several_model_types_names_none_of_them():
    """vLLM runs DeepSeek-V2, V3 and V3.2 from deepseek_v2.py: its frame does not say which
    (a DeepSeek-V3 crash was reported as deepseek_v2); a module for one type still says it."""
    shared = _v0_engine_traceback(("vllm/model_executor/models/deepseek_v2.py", "__init__"))
    assert analyze(shared).context.model_arch is None
    assert analyze(_v0_engine_traceback(("vllm/model_executor/models/qwen3_moe.py", "__init__"))).context.model_arch == "qwen3_moe"


def test_a_gpu_name_needs_its_model_not_only_the_vendor():
    """A short name is still a GPU (Tesla T4); the vendor before other words is not one
    (`The NVIDIA driver on your system is too old`)."""
    bf16 = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
            "Your Tesla T4 GPU has compute capability 7.5.\n")
    assert analyze(bf16.encode()).context.gpu.name == "Tesla T4"
    driver = ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). "
              "Please update your GPU driver.\n")
    assert analyze(driver.encode()).context.gpu.name is None


def test_an_rl_trainers_actor_step_is_training():
    """verl's actor computing log-probs, OpenRLHF's PPO step: running out of memory there is
    a training step's, whatever engine serves the rollouts."""
    log = ("Traceback (most recent call last):\n"
           '  File "/workspace/verl/verl/workers/fsdp_workers.py", line 790, in compute_log_prob\n'
           "    output = self.actor.compute_log_prob(data=data)\n"
           '  File "/workspace/verl/verl/workers/actor/dp_actor.py", line 266, in _forward_micro_batch\n'
           "    logits = self.actor_module(input_ids)\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.28 GiB. GPU 0 has a total capacity of 79.10 GiB\n")
    assert analyze(log.encode()).phase == "training"
