"""The scorer's identity policy (kb.core.match with kb.core.recall's weights): pairs that
must never be one incident stay apart, the same crash re-captured stays together, rare
terms decide over boilerplate, and another engine's crash is never known by itself."""

from __future__ import annotations

import dataclasses

import pytest

from kb.core.analyze import analyze
from kb.core.comparable import comparable
from kb.core.match import SIMILAR_THRESHOLD, _cut_mid_word, message_similarity, score, without_value_reports
from kb.core.normalize import message_template
from kb.core.recall import TermWeights, recall_keys, terms
from kb.core.records import CrashFeatures

# A small knowledge base's templates: what the weights are counted over.
STORED = [message_template(m) for m in (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB",
    "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 23.6 GiB",
    "CUDA error: an illegal memory access was encountered",
    "CUDA error: no kernel image is available for execution on the device",
    "Total number of attention heads (40) must be divisible by tensor parallel size (6).",
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (1024).",
    "libcudart.so.12: cannot open shared object file: No such file or directory",
)]
WEIGHTS = TermWeights.over(STORED)


def _crash(exception: str, message: str, engine: str | None = "vllm", **context) -> CrashFeatures:
    return CrashFeatures(exception=exception, message_template=message_template(message), engine=engine, **context)


# (first, second): crashes with other causes and other fixes, however alike they read
MUST_NOT_MERGE = [
    (_crash("ValueError", "Total number of attention heads (40) must be divisible by tensor parallel size (6)."),
     _crash("ValueError", "Total number of experts (64) must be divisible by expert parallel size (3).")),
    (_crash("ImportError", "libcudart.so.12: cannot open shared object file: No such file or directory"),
     _crash("ImportError", "libnccl.so.2: cannot open shared object file: No such file or directory")),
    # a library whose name holds a version (no shared libpython) vs a plugin library never built
    (_crash("ImportError", "libpython3.10.so.1.0: cannot open shared object file: No such file or directory",
            engine="tensorrt-llm"),
     _crash("OSError", "/usr/local/lib/python3.10/dist-packages/tensorrt_llm/libs/libnvinfer_plugin_tensorrt_llm.so: "
                       "cannot open shared object file: No such file or directory", engine="tensorrt-llm")),
    (_crash("RuntimeError", "CUDA error: an illegal memory access was encountered"),
     _crash("RuntimeError", "CUDA error: no kernel image is available for execution on the device")),
    (_crash("ImportError", "/opt/venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
                           "undefined symbol: _ZN3c104cuda9SetDeviceEi"),
     _crash("ImportError", "/opt/venv/lib/python3.10/site-packages/sgl_kernel/common_ops.abi3.so: "
                           "undefined symbol: cuGreenCtxDestroy")),
    # one NCCL result code apart: a CUDA failure under NCCL vs a system (/dev/shm, IB) failure
    (_crash("torch.distributed.DistBackendError", "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5"),
     _crash("torch.distributed.DistBackendError", "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5")),
    (_crash("RuntimeError", "CUDA error: out of memory"), _crash("RuntimeError", "CUDA error: misaligned address")),
    # a communicator's first collective timing out (it never worked) vs a later one (ranks out of step)
    (_crash("NCCL watchdog timeout", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
            "OpType=ALLREDUCE, Timeout(ms)=60000) ran for 69662 milliseconds before timing out.", engine="pytorch"),
     _crash("NCCL watchdog timeout", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, "
            "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.", engine="pytorch")),
    # segfaults at two crash sites: the signal is all their messages share
    (dataclasses.replace(_crash("SIGSEGV", "process killed by SIGSEGV"), frames=["<native>:ncclCommInitRank"]),
     dataclasses.replace(_crash("SIGSEGV", "process killed by SIGSEGV"),
                         frames=["tokenizers/implementations/base_tokenizer.py:encode_batch"])),
    (dataclasses.replace(_crash("SIGSEGV", "process killed by SIGSEGV"), frames=["<native>:ncclCommInitRank"]),
     _crash("SIGSEGV", "process killed by SIGSEGV")),
    # memory running out while loading weights vs in a training step: one text, two causes
    (_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 86.00 MiB. GPU 0 has a total capacity "
            "of 23.64 GiB of which 264.00 MiB is free.", engine="pytorch", phase="weight_loading"),
     _crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 86.00 MiB. GPU 3 has a total capacity "
            "of 79.10 GiB of which 12.00 MiB is free.", engine="pytorch", phase="training")),
    # ... and a phase nobody could tell: never the same crash for sure
    (_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB.", engine="pytorch"),
     _crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 4.00 GiB.", engine="pytorch",
            phase="training")),
]


_LOADER_STACK = ["vllm/model_executor/model_loader/default_loader.py:load_weights",
                 "vllm/model_executor/layers/linear.py:weight_loader"]
_STEP_STACK = ["transformers/trainer.py:training_step", "torch/_tensor.py:backward"]
MUST_NOT_MERGE += [
    # out of memory in two call stacks, the phase unknown on both sides: two places, two causes
    (dataclasses.replace(_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB."),
                         frames=_LOADER_STACK),
     dataclasses.replace(_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB."),
                         frames=_STEP_STACK)),
    # one call stack, but phases that disagree: not the same for sure
    (dataclasses.replace(_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB.",
                                phase="weight_loading"), frames=_LOADER_STACK),
     dataclasses.replace(_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB.",
                                phase="serving"), frames=_LOADER_STACK)),
    # torch's words for a tensor of the wrong shape name no tensor: a parallel group laid out for
    # the trainer's world size vs an attention kernel's KV cache view (where unknown on one side)
    (dataclasses.replace(_crash("RuntimeError", "shape '[2, 4, 1]' is invalid for input of size 16"),
                         frames=["vllm/distributed/parallel_state.py:initialize_model_parallel"]),
     _crash("logged error", "shape '[512, 64, 576]' is invalid for input of size 1179648")),
    (dataclasses.replace(_crash("RuntimeError", "The size of tensor a (0) must match the size of tensor b (4096) "
                                "at non-singleton dimension 1"), frames=["peft/tuners/lora/layer.py:merge"]),
     dataclasses.replace(_crash("RuntimeError", "The size of tensor a (128) must match the size of tensor b (64) "
                                "at non-singleton dimension 3"), frames=["vllm/model_executor/layers/rotary_embedding.py:forward_native"])),
]


_FP8E4NV = "type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')"
_CONFIG_LOOKUP = ["transformers/models/auto/configuration_auto.py:from_pretrained",
                  "transformers/models/auto/configuration_auto.py:__getitem__"]
MUST_NOT_MERGE += [
    # two errno values: a file missing and one not readable are two failures
    (_crash("ImportError", "libcudart.so.12: cannot open shared object file: No such file or directory"),
     _crash("ImportError", "libcudart.so.12: cannot open shared object file: Permission denied")),
    # one bind, two errno reasons: a port another process holds vs a privileged port
    (_crash("torch.distributed.DistNetworkError",
            "The server socket has failed to listen on any local network address. The server socket has failed "
            "to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind "
            "to 0.0.0.0:29500 (errno: 98 - Address already in use).", engine="pytorch"),
     _crash("torch.distributed.DistNetworkError",
            "The server socket has failed to listen on any local network address. The server socket has failed "
            "to bind to [::]:80 (errno: 13 - Permission denied). The server socket has failed to bind "
            "to 0.0.0.0:80 (errno: 13 - Permission denied).", engine="pytorch")),
    (_crash("OSError", "[Errno 98] Address already in use"), _crash("OSError", "[Errno 99] Cannot assign requested address")),
    (_crash("torch.distributed.DistNetworkError",
            "The server socket has failed to listen on any local network address. port: 29400, useIpv6: 0, "
            "code: -98, name: EADDRINUSE, message: address already in use", engine="pytorch"),
     _crash("torch.distributed.DistNetworkError",
            "The server socket has failed to listen on any local network address. port: 80, useIpv6: 0, "
            "code: -13, name: EACCES, message: permission denied", engine="pytorch")),
    # two wrappers carrying other errors
    (_crash("Exception", "Capture cuda graph failed: RuntimeError: CUDA error: out of memory"),
     _crash("Exception", "Capture cuda graph failed: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed "
                         "during CUDA graph capture.")),
    # a bare key looked up in two places: a model type unknown to transformers vs a weight missing
    (dataclasses.replace(_crash("KeyError", "'qwen2'"), frames=_CONFIG_LOOKUP),
     dataclasses.replace(_crash("KeyError", "'lm_head.weight'"),
                         frames=["vllm/model_executor/models/llama.py:load_weights"])),
    # ... and one whose raise site the log does not show
    (dataclasses.replace(_crash("KeyError", "'qwen2'"), frames=_CONFIG_LOOKUP), _crash("KeyError", "'qwen2'")),
    # one compiler message from two kernels: a MoE kernel (another MoE backend) vs a
    # block-scaled GEMM (a regression of one release)
    (dataclasses.replace(_crash("ValueError", _FP8E4NV), frames=["<triton>:fused_moe_kernel"]),
     dataclasses.replace(_crash("ValueError", _FP8E4NV), frames=["vllm/model_executor/layers/quantization/utils/"
                                                                 "fp8_utils.py:w8a8_block_fp8_matmul",
                                                                 "<triton>:_w8a8_block_fp8_matmul"])),
]


def test_a_clause_of_detail_one_side_adds_does_not_tell_two_failures_apart():
    """Linkers of some versions append the errno text to what failed; Python 3.12 added a
    clause to its fatal errors. A generic head ("CUDA error") is not enough to say so."""
    assert score(_crash("linker error", "/usr/bin/ld: cannot find -lcuda"),
                 _crash("linker error", "/usr/bin/ld: cannot find -lcuda: No such file or directory"),
                 WEIGHTS).status == "known"
    assert score(_crash("Fatal Python error", "none_dealloc: deallocating None"),
                 _crash("Fatal Python error", "none_dealloc: deallocating None: bug likely caused by a refcount "
                                              "error in a C extension"), WEIGHTS).status == "known"
    assert score(_crash("RuntimeError", "CUDA error"), _crash("RuntimeError", "CUDA error: misaligned address"),
                 WEIGHTS).status != "known"


def test_a_wrapper_that_carries_a_typed_error_is_that_error():
    """The same error, quoted by a wrapper with its type or raised on its own."""
    text = "Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to be " \
           "captured, please file an issue."
    wrapped = _crash("Exception", f"Capture cuda graph failed: RuntimeError: {text}", engine="sglang")
    for other in (_crash("torch._dynamo.exc.InternalTorchDynamoError", f"RuntimeError: {text}", engine="sglang"),
                  _crash("RuntimeError", text, engine="sglang")):
        assert score(wrapped, other, WEIGHTS).status == "known"
        assert recall_keys(wrapped).message_key == recall_keys(other).message_key


def test_a_message_that_is_only_a_value_is_known_by_where_it_was_raised():
    """KeyError: 'qwen2' and KeyError: 'llama' from transformers' config lookup, called
    from two users' scripts: one cause (a transformers too old for the model type)."""
    a = dataclasses.replace(_crash("KeyError", "'qwen2'", engine=None),
                            frames=["sft/finetune.py:train", *_CONFIG_LOOKUP])
    b = dataclasses.replace(_crash("KeyError", "'llama'", engine=None),
                            frames=["experiments/evaluate.py:main", "transformers/models/auto/auto_factory.py:from_pretrained",
                                    *_CONFIG_LOOKUP])
    assert score(a, b, WEIGHTS).status == "known"


def test_out_of_memory_in_one_call_stack_is_known_though_no_log_names_the_phase():
    """The call stack where memory ran out is the phase, whether or not the log says it."""
    a = dataclasses.replace(_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB."),
                            frames=_LOADER_STACK)
    b = dataclasses.replace(_crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 1.50 GiB."),
                            frames=_LOADER_STACK, phase="weight_loading")
    assert score(a, b, WEIGHTS).status == "known"
    assert score(a, dataclasses.replace(a, frames=[]), WEIGHTS).status != "known"


def test_one_timeout_printed_in_another_unit_is_one_crash():
    """torch printed the TCPStore client's timeout in seconds, later in milliseconds; the
    timeout itself is each run's setting."""
    a = _crash("torch.distributed.DistNetworkError", "The client socket has timed out after 60s while trying to "
               "connect to (10.1.16.222, 29400).", engine="pytorch", phase="startup")
    b = _crash("torch.distributed.DistNetworkError", "The client socket has timed out after 1800000ms while trying "
               "to connect to (172.16.0.5, 29500).", engine="pytorch", phase="startup")
    assert a.message_template == b.message_template
    assert score(a, b, WEIGHTS).status == "known"


def test_an_http_status_is_kept_and_tells_two_refusals_apart():
    """'401 Client Error' (no token) and '403 Client Error' (a gated repo not accepted) are
    two fixes, however alike the rest of the text reads."""
    assert message_template("401 Client Error: Unauthorized for url: https://huggingface.co/api/models/x") == \
        "401 Client Error: Unauthorized for url: <url>"
    a = _crash("huggingface_hub.errors.HfHubHTTPError", "401 Client Error. (Request ID: Root=1-65f2c9)")
    b = _crash("huggingface_hub.errors.HfHubHTTPError", "403 Client Error. (Request ID: Root=1-65f2c9)")
    assert score(a, b, WEIGHTS).status != "known"
    assert score(a, _crash("huggingface_hub.errors.HfHubHTTPError", "401 Client Error. (Request ID: Root=1-7d0a4e)"),
                 WEIGHTS).status == "known"


def test_a_cuda_error_printed_without_its_type_is_the_runtime_error_torch_raises():
    """The NCCL watchdog's c10::Error prints "CUDA error: ..." with no type; a Python frame
    raises the same text as RuntimeError."""
    text = "CUDA error: operation not permitted when stream is capturing"
    assert score(_crash("CUDA error", text), _crash("RuntimeError", text), WEIGHTS).status == "known"
    assert score(_crash("CUDA error", text), _crash("RuntimeError", "CUDA error: an illegal memory access was "
                                                    "encountered"), WEIGHTS).status != "known"
    image = "CUDA error: no kernel image is available for execution on the device"
    ggml = dataclasses.replace(_crash("CUDA error", image, engine=None),
                               frames=["<native>:ggml_cuda_error", "<native>:ggml_cuda_compute_forward"])
    torch = dataclasses.replace(_crash("RuntimeError", image, engine=None),
                                frames=["peft/tuners/lora/layer.py:forward", "torch/nn/modules/linear.py:forward"])
    assert score(ggml, torch, WEIGHTS).status != "known"  # llama.cpp's build and torch's wheel: two fixes


def test_nccls_last_error_is_compared_not_its_result_sentence():
    """torch quotes NCCL's result and its last error; a NCCL WARN line says the last error
    alone. Two last errors under one result are two failures."""
    quoted = _crash("ncclUnhandledCudaError", "Call to CUDA function failed.\nLast error:\nCuda failure "
                    "'invalid argument'")
    warned = _crash("NCCL error", "Cuda failure 1 'invalid argument'")
    assert score(quoted, warned, WEIGHTS).status == "known"
    other = _crash("ncclUnhandledCudaError", "Call to CUDA function failed.\nLast error:\nCuda failure 'unknown error'")
    assert score(quoted, other, WEIGHTS).status != "known"
    # the CUDA error NCCL quotes is no NCCL result ("invalid argument" is also one of those)
    relayed = _crash("torch.distributed.DistBackendError", "NCCL error in: NCCLUtils.hpp:275, unhandled cuda error "
                     "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclUnhandledCudaError: Call to CUDA "
                     "function failed.\nLast error:\nCuda failure 'invalid argument'")
    assert score(quoted, relayed, WEIGHTS).status == "known"


def test_torchs_cuda_initialization_failure_is_the_cuda_error_it_quotes():
    """torch's "Unexpected error from cudaGetDeviceCount() ... Error 802: system not yet
    initialized" (a fabric manager not running) is the CUDA error every other report says."""
    init = "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling " \
           "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized"
    raised = "CUDA error: system not yet initialized"
    assert score(_crash("RuntimeError", init), _crash("RuntimeError", raised), WEIGHTS).status == "known"
    other = init.replace("802: system not yet initialized", "804: forward compatibility was attempted on non supported HW")
    assert score(_crash("RuntimeError", init), _crash("RuntimeError", other), WEIGHTS).status != "known"


def test_a_cuda_error_printed_with_its_code_and_site_is_the_cuda_error():
    """ggml's older "CUDA error 222 at <file>:<line>: <text>" and its later "CUDA error:
    <text>" (the site on the next line) are one CUDA error; another text is another."""
    old = _crash("CUDA error", "CUDA error 222 at /llama.cpp/ggml-cuda.cu:9132: the provided PTX was compiled "
                 "with an unsupported toolchain.")
    new = _crash("CUDA error", "CUDA error: the provided PTX was compiled with an unsupported toolchain.")
    assert score(old, new, WEIGHTS).status == "known"
    other = _crash("CUDA error", "CUDA error 209 at /llama.cpp/ggml-cuda.cu:9132: no kernel image is available "
                   "for execution on the device")
    assert score(other, new, WEIGHTS).status != "known"


def test_a_message_cut_inside_a_word_is_the_whole_one_cut():
    """An excerpt that ends inside a word was cut by a viewer, however short it is; a
    whole message that another one extends with its detail is not cut."""
    kernel = ["vllm/attention/ops/prefix_prefill.py:context_attention_fwd"]  # (which kernel: see below)
    whole = _crash("triton.runtime.errors.OutOfResources", "out of resource: shared memory, Required: 131072, "
                   "Hardware limit: 65536. Reducing block sizes or `num_stages` may help.", frames=kernel)
    cut = _crash("triton.runtime.errors.OutOfResources", "out of resource: shared me", frames=kernel)
    assert score(whole, cut, WEIGHTS).status == "known"
    assert score(whole, _crash("triton.runtime.errors.OutOfResources", "out of resource: registers", frames=kernel),
                 WEIGHTS).status != "known"
    short = _crash("safetensors_rust.SafetensorError", "Error while deserializing header")
    detailed = _crash("safetensors_rust.SafetensorError", "Error while deserializing header: HeaderTooLarge")
    assert not _cut_mid_word(short.message_template, detailed.message_template)


def test_the_keys_of_a_printed_mapping_name_what_was_asked_for():
    """Ray's autoscaler prints the request no node can fulfill: a node resource of another
    address ({'node:<ip>', 'GPU'}) and a GPU Ray does not see ({'CPU', 'GPU'}) are two
    fixes; the amounts are the run's."""
    text = "No available node types can fulfill resource request {}. Add suitable node types to this cluster."
    node = _crash("Ray infeasible resource request", text.format("{'node:10.0.3.17': 0.001, 'GPU': 1.0}"))
    node_again = _crash("Ray infeasible resource request", text.format("{'node:172.16.10.33': 0.001, 'GPU': 2.0}"))
    gpu = _crash("Ray infeasible resource request", text.format("{'CPU': 1.0, 'GPU': 1.0}"))
    assert score(node, node_again, WEIGHTS).status == "known"
    assert score(node, gpu, WEIGHTS).status != "known"


def test_a_libstdcxx_too_old_for_two_extensions_is_one_crash():
    """The loader names the library that needs the symbol version; the old libstdc++ is
    the error whichever extension needed it, raised as OSError (ctypes) or ImportError."""
    a = dataclasses.replace(_crash("OSError", "/opt/conda/lib/libstdc++.so.6: version `GLIBCXX_3.4.30' not found "
                                   "(required by /opt/fastllm/libfastllm_tools.so)", engine=None),
                            frames=["fastllm_pytools/llm.py:<module>", "ctypes/__init__.py:LoadLibrary"])
    b = dataclasses.replace(_crash("ImportError", "/lib64/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required "
                                   "by /usr/lib/python3/site-packages/llmd_fs_backend/storage_offload.so)", engine=None),
                            frames=["llmd_fs_backend/spec.py:<module>", "llmd_fs_backend/worker.py:<module>"])
    assert score(a, b, WEIGHTS).status == "known"


def test_cpythons_own_words_without_where_they_were_raised_are_not_known():
    """'integer division or modulo by zero' names nothing: KServe dividing by a GPU count
    of zero and vLLM's NIXL connector dividing TP sizes are two crashes."""
    kserve = _crash("logged error", "Failed to start model server: integer division or modulo by zero", engine=None)
    nixl = _crash("ZeroDivisionError", "integer division or modulo by zero", engine="vllm")
    assert score(kserve, nixl, WEIGHTS).status != "known"
    same_site = ["vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py:add_remote_agent"]
    assert score(dataclasses.replace(nixl, frames=same_site), dataclasses.replace(nixl, frames=same_site),
                 WEIGHTS).status == "known"


def test_a_device_fault_without_where_it_surfaced_is_not_known():
    """'an illegal memory access was encountered' is reported at the next sync, whichever
    kernel faulted: a bare line and an SGLang graph capture that hit it are two crashes;
    the same place it surfaced is one."""
    bare = _crash("CUDA error", "CUDA error: an illegal memory access was encountered", engine=None)
    capture = _crash("RuntimeError", "CUDA error: an illegal memory access was encountered", engine="sglang",
                     frames=["sglang/srt/model_executor/cuda_graph_runner.py:__init__"])
    assert score(bare, capture, WEIGHTS).status != "known"
    assert score(capture, dataclasses.replace(capture), WEIGHTS).status == "known"


def test_a_kernel_over_the_gpus_limits_is_known_only_by_which_kernel():
    """Triton's 'out of resource: shared memory' names no kernel: vLLM's prefix-prefill
    attention and an OCR model's own kernel read alike and are fixed apart. Without where
    it was raised on one side it is at most similar; the same kernel is one crash."""
    text = "out of resource: shared memory, Required: 98304, Hardware limit: 65536. Reducing block sizes or `num_stages` may help."
    bare = _crash("triton.runtime.errors.OutOfResources", text, engine=None)
    prefill = _crash("triton.runtime.errors.OutOfResources", text, engine=None,
                     frames=["vllm/attention/ops/prefix_prefill.py:context_attention_fwd"])
    assert score(bare, dataclasses.replace(bare), WEIGHTS).status != "known"
    assert score(bare, prefill, WEIGHTS).status != "known"
    assert score(prefill, dataclasses.replace(prefill), WEIGHTS).status == "known"


def test_pynccls_error_a_logger_kept_as_text_is_the_runtime_error_it_raised():
    """vLLM's worker logs 'while processing method init_device: NCCL error: unhandled system
    error ...' (str(e) only); the same launch elsewhere prints the RuntimeError pynccl raised."""
    text = "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
    logged, raised = _crash("NCCL error", text), _crash("RuntimeError", text)
    assert score(logged, raised, WEIGHTS).status == "known"
    other = _crash("RuntimeError", "NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)")
    assert score(logged, other, WEIGHTS).status != "known"


def test_a_runtimes_error_code_tells_two_failures_apart():
    """Ascend's ACL reports each failure by its code: 507035 (a vector core exception) and
    507018 are two crashes under one sentence; one code twice is one."""
    frames = ["vllm_ascend/worker/model_runner_v1.py:execute_model"]
    first = _crash("RuntimeError", "ACL stream synchronize failed, error code:507035", frames=frames)
    other = _crash("RuntimeError", "ACL stream synchronize failed, error code:507018", frames=frames)
    assert "507035" in first.message_template
    assert score(first, other, WEIGHTS).status != "known"
    assert score(first, dataclasses.replace(first), WEIGHTS).status == "known"


@pytest.mark.parametrize("printed", [
    "EH9999: wait for compute device to finish failed, runtime result = {}.",
    "[torch_memory_saver.cpp] CUresult error  result={} file=csrc/torch_memory_saver.cpp func=resume line=214",
    "Native API failed. Native API returns: {} (see the runtime's result code)",
    "nrt_tensor_allocate status={} message=\"Allocation Failure\"",
])
def test_a_result_code_printed_in_any_form_tells_two_failures_apart(printed):
    """A runtime's result or status code is what failed, whatever word introduces it
    (CANN's "runtime result = 507018", a driver's "result=1", SYCL's "returns: 20")."""
    first, other = (_crash("RuntimeError", printed.format(code)) for code in ("507018", "507013"))
    assert "507018" in first.message_template
    assert score(first, other, WEIGHTS).status != "known"
    assert score(first, dataclasses.replace(first), WEIGHTS).status == "known"


def test_the_shared_library_the_loader_cannot_open_tells_two_crashes_apart():
    """libcuda.so missing (no driver in the container) and libcudart.so missing (no CUDA
    runtime of that major) read alike and are fixed apart."""
    driver = _crash("ImportError", "libcuda.so.1: cannot open shared object file: No such file or directory")
    runtime = _crash("ImportError", "libcudart.so.12: cannot open shared object file: No such file or directory")
    assert score(driver, runtime, WEIGHTS).status != "known"
    again = _crash("ImportError", "libcudart.so.12: cannot open shared object file: No such file or directory")
    assert score(runtime, again, WEIGHTS).status == "known"


def test_a_rocm_memory_access_fault_without_where_it_surfaced_is_not_known():
    fault = "Memory access fault by GPU node-4 (Agent handle: 0x55d1c0a2e0) on address 0x7f1a00000000. Reason: Unknown."
    bare = _crash("GPU memory access fault", fault, engine=None)
    other = _crash("GPU memory access fault", fault.replace("node-4", "node-3"), engine=None)
    assert score(bare, other, WEIGHTS).status != "known"


def test_an_install_path_the_reporter_cut_the_home_off_is_library_relative():
    from kb.core.normalize import library_path

    assert library_path("anaconda3/envs/x/lib/python3.12/site-packages/vllm/platforms/cuda.py") == "vllm/platforms/cuda.py"
    assert library_path("anaconda3/envs/x/lib/python3.12/importlib/__init__.py") == "importlib/__init__.py"
    assert library_path("src/libfoo/model.py") == "src/libfoo/model.py"  # a project's own relative path stays


def test_the_namespace_of_a_missing_symbol_says_whose_abi_did_not_match():
    """An extension built against another torch misses a c10:: symbol, TensorRT-LLM's
    bindings built against other TensorRT libraries a tensorrt_llm:: or nvinfer1:: one:
    two fixes. Which symbol of a namespace is missing varies with the versions."""
    def missing(symbol: str) -> CrashFeatures:
        return _crash("ImportError", f"/usr/local/lib/python3.10/dist-packages/tensorrt_llm/bindings.so: "
                                     f"undefined symbol: {symbol}", engine="tensorrt-llm")
    torch_abi = missing("_ZN3c1017RegisterOperatorsD1Ev")
    assert "torch::<symbol>" in torch_abi.message_template
    assert score(torch_abi, missing("_ZNK3c106SymInt6sym_neEl"), WEIGHTS).status == "known"
    assert score(torch_abi, missing("_ZN2at4_ops10empty_like4callERKNS_6TensorE"), WEIGHTS).status == "known"
    assert score(torch_abi, missing("_ZN12tensorrt_llm7runtime9GptDecoderC1Ev"), WEIGHTS).status != "known"


def test_the_module_an_import_names_is_kept_and_a_parameter_name_is_not():
    """Which module is missing is the error; which parameter of a model is this model's."""
    assert message_template("No module named 'tensorrt_llm.models.llama.weight'") == \
        "No module named 'tensorrt_llm.models.llama.weight'"
    assert message_template("cannot import name 'LlamaConfig' from 'transformers.models.llama'") == \
        "cannot import name 'LlamaConfig' from 'transformers.models.llama'"
    assert message_template("weight model.layers.0.self_attn.q_proj.weight does not exist") == \
        "weight <name> does not exist"
    assert score(_crash("ModuleNotFoundError", "No module named 'vllm.model_executor.layers.fused_moe'"),
                 _crash("ModuleNotFoundError", "No module named 'vllm.lora.ops.triton_ops'"), WEIGHTS).status != "known"


@pytest.mark.parametrize("first,second", MUST_NOT_MERGE, ids=lambda c: c.message_template[:30])
def test_crashes_with_other_causes_are_never_known_to_each_other(first, second):
    for a, b in ((first, second), (second, first)):
        result = score(a, b, WEIGHTS)
        assert result.status != "known", (result.score, result.explanation)


def test_the_same_crash_on_another_gpu_and_version_is_known():
    a = _crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 1.74 GiB. GPU 1 has a total "
               "capacity of 23.57 GiB of which 605.88 MiB is free.", engine_version="0.8.0",
               phase="kv_cache_profiling")
    b = _crash("torch.cuda.OutOfMemoryError", "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 7 has a total "
               "capacity of 79.15 GiB of which 3.12 MiB is free.", engine_version="0.8.1",
               phase="kv_cache_profiling")
    assert score(a, b, WEIGHTS).status == "known"


def test_a_crash_of_another_engine_is_at_best_similar():
    vllm = _crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB.", engine="vllm",
                  phase="serving")
    sglang = _crash("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 4.00 GiB.", engine="sglang",
                    phase="serving")
    assert score(sglang, dataclasses.replace(vllm, engine="sglang"), WEIGHTS).status == "known"
    result = score(sglang, vllm, WEIGHTS)
    assert result.status == "similar" and result.score >= SIMILAR_THRESHOLD


def test_rare_terms_decide_and_boilerplate_does_not():
    """Two texts that share only the common words are farther apart with the weights of
    the knowledge base than with every word weighing the same."""
    a = message_template("Total number of attention heads (40) must be divisible by tensor parallel size (6).")
    b = message_template("Total number of experts (64) must be divisible by expert parallel size (3).")
    assert message_similarity(a, b, WEIGHTS) < message_similarity(a, b)
    assert WEIGHTS.weight("heads") > WEIGHTS.weight("cuda")


def test_a_message_cut_by_a_viewer_still_matches_its_full_text():
    full = message_template("The model's max seq len (32768) is larger than the maximum number of tokens that "
                            "can be stored in KV cache (1024). Try increasing `gpu_memory_utilization` or "
                            "decreasing `max_model_len` when initializing the engine.")
    assert message_similarity(full[:90], full, WEIGHTS) >= 95


def test_recall_keys_come_from_the_features_and_ignore_an_unknown_phase():
    keys = recall_keys(_crash("ValueError", "No available memory for the cache blocks. Try 0.9", phase="unknown"))
    assert (keys.exception, keys.message_key, keys.engine, keys.phase) == (
        "ValueError", "available memory for", "vllm", None)


def test_placeholders_are_not_terms():
    assert terms(message_template("Tried to allocate 2.00 GiB on /dev/shm/x at 0x7f12")) == {"tried", "allocate", "on", "at"} - {"on", "at"}


def test_a_leading_locator_tag_and_repeated_per_process_sentences_do_not_tell_crashes_apart():
    """torch releases name the failing rank three ways, and the OOM text lists one
    sentence per process on the GPU: where and how many are not what went wrong."""
    old = "[PG 0 Rank 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog caught " \
          "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 ms"
    new = "[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: " \
          "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, " \
          "Timeout(ms)=600000) ran for 600071 ms"
    assert message_similarity(message_template(old), message_template(new), WEIGHTS) == 100.0
    one = "CUDA out of memory. Tried to allocate 2.00 GiB. Process 11 has 3.00 GiB memory in use. Of the allocated"
    three = ("CUDA out of memory. Tried to allocate 1.00 GiB. Process 4 has 3.00 GiB memory in use. Process 5 has "
             "9.10 GiB memory in use. Process 6 has 1.20 GiB memory in use. Of the allocated")
    assert message_similarity(message_template(one), message_template(three), WEIGHTS) == 100.0


def test_the_same_statement_with_reworded_advice_is_known():
    """One error, two releases' advice after it: the statement decides (and an aside that
    reports which config key held the number is not the error)."""
    a = _crash("ValueError", "User-specified max_model_len (65536) is greater than the derived max_model_len "
               "(max_position_embeddings=32768 or model_max_length=None in model's config.json). To allow "
               "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", phase="config")
    b = _crash("ValueError", "User-specified max_model_len (40960) is greater than the derived max_model_len "
               "(seq_length=32768 or model_max_length=None in model's config.json). This may lead "
               "to incorrect model outputs or CUDA errors. Make sure the value is correct and within the model "
               "context size.", phase="config")
    assert score(a, b, WEIGHTS).status == "known"


def test_a_native_error_and_the_python_exception_that_carries_its_text_are_one_type():
    """The loader's text alone (a wrapper kept only the text, or a C++ server printed it)
    and Python's ImportError of that text are one crash."""
    text = "/opt/venv/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: " \
           "undefined symbol: _ZN3c104cuda9SetDeviceEi"
    assert score(_crash("dynamic loader error", text), _crash("ImportError", text), WEIGHTS).status == "known"
    assert score(_crash("dynamic loader error", text), _crash("ValueError", text), WEIGHTS).status != "known"


def test_an_nccl_error_line_and_the_result_name_torch_prints_are_one_kind():
    """A C++ caller's "NCCL error" line and torch's `ncclInvalidUsage: ...` name one NCCL
    result; two results NCCL tells apart stay apart."""
    text = "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000"
    assert score(_crash("NCCL error", text), _crash("ncclInvalidUsage", text), WEIGHTS).status == "known"
    assert score(_crash("ncclSystemError", text), _crash("ncclInvalidUsage", text), WEIGHTS).status != "known"


def test_a_printed_record_of_the_run_is_compared_by_its_type_not_its_fields():
    """torch prints the stalled collective as WorkNCCL(SeqNum=.., OpType=.., NumelIn=..):
    releases add fields, and which collective stalled is this run's, not the crash's."""
    a = _crash("torch.distributed.DistBackendError", "[Rank 2] Watchdog caught collective operation timeout: "
               "WorkNCCL(SeqNum=8301, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
               "1800041 milliseconds before timing out.", engine="pytorch")
    b = _crash("torch.distributed.DistBackendError", "[Rank 0] Watchdog caught collective operation timeout: "
               "WorkNCCL(SeqNum=12, OpType=_ALLGATHER_BASE, Timeout(ms)=600000) ran for 600329 milliseconds "
               "before timing out.", engine="pytorch")
    assert score(a, b, WEIGHTS).status == "known"


def test_a_record_the_templates_length_cut_is_still_read_as_a_record():
    """A template is cut at its length cap, often inside a record: the record's type is
    kept, its fields (a value with its own parentheses too) left out."""
    cut = "Timed out: WorkNCCL(SeqNum=<n>, OpType=ALLREDUCE, NumelIn=<n>, Timeout(ms)=<n>"
    assert comparable(cut) == "Timed out: WorkNCCL(...)"
    assert comparable("Timed out: WorkNCCL(SeqNum=<n>, OpType=ALLREDUCE, Timeout(ms") == "Timed out: WorkNCCL(...)"
    assert comparable("failed: Rec(a=<n>, b=Opt(dtype=float (default)), c=<n>) end") == \
        "failed: Rec(a=<n>, b=Opt(...), c=<n>) end"


def test_argparse_refusing_one_flag_in_two_scripts_is_one_crash():
    """torch 2's launcher passes --local-rank: every script that declares --local_rank
    refuses it. The script's name is the run's; the flag is one flag however joined."""
    a = _crash("usage error", "train.py: error: unrecognized arguments: --local-rank=1", engine="pytorch")
    b = _crash("usage error", "main_pretrain.py: error: unrecognized arguments: --local_rank=3", engine="pytorch")
    assert score(a, b, WEIGHTS).status == "known"
    other_flag = _crash("usage error", "main_pretrain.py: error: unrecognized arguments: --deepspeed_config",
                        engine="pytorch")
    assert score(a, other_flag, WEIGHTS).status != "known"
    assert comparable("vllm: error: unrecognized arguments: --omni") == "vllm: error: unrecognized arguments: --omni"


def test_a_generic_message_raised_from_other_code_is_not_known():
    """'N is not divisible by M' names nothing: heads over TP in a model, or experts over
    the world size in DeepSpeed. The code that raised it tells them apart."""
    heads = dataclasses.replace(
        _crash("AssertionError", "2 is not divisible by 4", engine="pytorch"),
        frames=["megatron/core/tensor_parallel/layers.py:__init__", "megatron/core/utils.py:divide",
                "megatron/core/utils.py:ensure_divisibility"])
    experts = dataclasses.replace(
        _crash("AssertionError", "8 is not divisible by 16", engine="pytorch"),
        frames=["deepspeed/moe/layer.py:_create_process_groups",
                "deepspeed/utils/groups.py:_create_expert_and_data_parallel",
                "deepspeed/utils/groups.py:_ensure_divisibility"])
    assert score(heads, experts, WEIGHTS).status != "known"
    assert score(heads, dataclasses.replace(heads, message_template="<n> is not divisible by <n>"),
                 WEIGHTS).status == "known"


def test_an_error_a_library_retyped_to_a_subclass_is_the_same_type():
    """torch 2.2 raises DistNetworkError where 2.1 raised RuntimeError, with the same text;
    two different subclasses of RuntimeError stay two types."""
    text = "The server socket has failed to listen on any local network address. The server socket has " \
           "failed to bind to [::]:29500 (errno: 98 - Address already in use)."
    old = _crash("RuntimeError", text, engine="pytorch")
    new = _crash("torch.distributed.DistNetworkError", text, engine="pytorch")
    assert score(old, new, WEIGHTS).status == "known"
    assert score(new, dataclasses.replace(new, exception="torch.distributed.DistStoreError"),
                 WEIGHTS).status != "known"


def test_a_logged_error_that_names_no_type_is_matched_by_its_words_not_set_apart_as_another_type():
    """`[TRT-LLM] [E] Failed to initialize executor ...: <text>` is the logger's copy of
    the RuntimeError raised with <text>: untyped, not typed otherwise. Its words decide,
    both ways: the same text is the same crash, other text stays another one."""
    logged = _crash("logged error", "Failed to initialize executor on rank 1: Executor creation failed due to "
                                    "insufficient GPU memory.", engine="tensorrt-llm")
    raised = _crash("RuntimeError", "Executor creation failed due to insufficient GPU memory.", engine="tensorrt-llm")
    other = _crash("RuntimeError", "Executor creation failed: the engine file was built for another GPU.",
                   engine="tensorrt-llm")
    assert score(logged, raised, WEIGHTS).status == "known"
    assert score(logged, other, WEIGHTS).status != "known"
    typed = dataclasses.replace(logged, exception="ValueError")
    assert score(typed, raised, WEIGHTS).status != "known"  # a named type that differs still counts


def test_sentences_that_only_report_this_runs_values_do_not_tell_two_ooms_apart():
    """torch lists the other processes on the GPU and, in some releases, the memory outside
    PyTorch: one OOM text with and without those sentences is one error (the phase, not
    the text, tells OOMs apart). A sentence of other wording is not a value report."""
    head = "CUDA out of memory. Tried to allocate 238.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which " \
           "12.75 MiB is free. "
    tail = "Of the allocated memory 77.20 GiB is allocated by PyTorch, and 1.16 GiB is reserved by PyTorch but " \
           "unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF"
    listed = head + "Process 2154 has 79.13 GiB memory in use. " + tail
    outside = head + "Including non-PyTorch memory, this process has 79.13 GiB memory in use. " + tail
    a = _crash("torch.OutOfMemoryError", listed, engine="pytorch", phase="training")
    b = _crash("torch.OutOfMemoryError", outside, engine="pytorch", phase="training")
    assert message_similarity(a.message_template, b.message_template, WEIGHTS) == 100.0
    assert score(a, b, WEIGHTS).status == "known"
    worded = head + "This GPU is shared with another job, stop it first. " + tail
    assert len(set(without_value_reports(a.message_template, message_template(worded)))) == 2
    # another version of one sentence (memory held by CUDA graphs' pools) is not optional
    pools = listed.replace("allocated by PyTorch, and", "allocated by PyTorch, with 3.1 GiB allocated in "
                                                        "private pools (e.g., CUDA Graphs), and")
    assert len(set(without_value_reports(message_template(listed[:230]), message_template(pools[:230])))) == 2


def test_torchs_oom_report_of_this_runs_memory_does_not_tell_two_ooms_apart():
    """torch's OOM text before 2.1 ("(GPU 0; 23.65 GiB total capacity; ...)") and after
    ("GPU 0 has a total capacity of ...") reports the same thing in other words: two OOMs
    of one phase are one crash, of two phases two."""
    old = ("CUDA out of memory. Tried to allocate 1.96 GiB (GPU 0; 23.65 GiB total capacity; 20.01 GiB already "
           "allocated; 1.38 GiB free; 21.43 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
           "memory try setting max_split_size_mb to avoid fragmentation.")
    new = ("CUDA out of memory. Tried to allocate 2.63 GiB. GPU 7 has a total capacity of 79.33 GiB of which "
           "1.02 GiB is free. Process 1141 has 78.30 GiB memory in use. Of the allocated memory 74.1 GiB is "
           "allocated by PyTorch, and 2.7 GiB is reserved by PyTorch but unallocated.")
    a = _crash("torch.cuda.OutOfMemoryError", old, engine="pytorch", phase="training")
    b = _crash("torch.OutOfMemoryError", new, engine="pytorch", phase="training")
    assert score(a, b, WEIGHTS).status == "known"
    loading = _crash("torch.OutOfMemoryError", new, engine="pytorch", phase="weight_loading")
    assert score(a, loading, WEIGHTS).status != "known"


def test_the_watchdogs_own_line_and_torchs_error_that_quotes_it_are_one_crash():
    """The watchdog prints its line; torch raises DistBackendError whose text says the
    watchdog thread 'terminated with exception:' and quotes it, cut by the template's
    length inside the printed record. One crash."""
    line = _crash("NCCL watchdog timeout", "[Rank 1] Watchdog caught collective operation timeout: "
                  "WorkNCCL(SeqNum=5, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=600000) ran for "
                  "600046 milliseconds before timing out.", engine="pytorch", phase="training")
    raised = _crash("torch.distributed.DistBackendError", "[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group "
                    "watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation "
                    "timeout: WorkNCCL(SeqNum=94210, OpType=BROADCAST, NumelIn=146, NumelOut=146, "
                    "Timeout(ms)=1800000) ran for 1800084 milliseconds before timing out.",
                    engine="pytorch", phase="training")
    assert len(raised.message_template) == 240  # cut inside WorkNCCL(...)
    assert score(line, raised, WEIGHTS).status == "known"
    assert score(raised, line, WEIGHTS).status == "known"


def test_a_kernel_named_by_its_full_signature_or_by_name_is_one_assert():
    """A device-side assert prints the kernel as the build names it: with its template
    signature or bare. Which kernel asserted identifies the crash; the signature does not."""
    bare = "indexSelectLargeIndex: block: [403,0,0], thread: [48,0,0] Assertion `srcIndex < srcSelectDimSize` failed."
    signed = ("void indexSelectLargeIndex(TensorInfo<T, IndexType>, TensorInfo<T, IndexType>, TensorInfo<long, "
              "IndexType>, int, int, IndexType, IndexType, long) [with T = float, IndexType = unsigned int, DstDim = 2, "
              "SrcDim = 2, IdxDim = -2, IndexIsMajor = true]: block: [485,0,0], thread: [2,0,0] Assertion "
              "`srcIndex < srcSelectDimSize` failed.")
    assert message_template(bare) == message_template(signed)
    other = signed.replace("indexSelectLargeIndex", "indexSelectSmallIndex")
    assert message_template(other) != message_template(signed)


def test_recall_finds_one_error_behind_a_label_a_locator_or_a_wrapping_clause():
    """The key a crash is recalled by comes from what identifies its message: torch's
    warning 'CUDA initialization: <text>' and the RuntimeError of that text, the
    watchdog's line and the DistBackendError quoting it, a C++ logger's tagged line and
    the exception it becomes, share it; a short statement keeps its label (it would say
    too little without it)."""
    from kb.core.recall import message_key

    driver = "The NVIDIA driver on your system is too old (found version 11060). Please update your GPU driver."
    assert message_key(message_template("CUDA initialization: " + driver)) == message_key(message_template(driver))
    line = "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST) ran for 6 ms"
    raised = "[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: " + line
    assert message_key(message_template(line)) == message_key(message_template(raised)) == "watchdog caught collective"
    assert message_key("CUDA error: out of memory") != message_key("CUDA error: misaligned address")
    assertion = "Assertion failed: mpiSize == tp * pp (/src/cpp/tensorrt_llm/runtime/worldConfig.cpp:99)"
    assert message_key(message_template("[TensorRT-LLM][ERROR] " + assertion)) == message_key(message_template(assertion))


def test_a_warning_of_the_default_category_names_no_type_its_words_decide():
    """torch warns 'CUDA initialization: <the error>' as a UserWarning where another
    build raises RuntimeError with the same words: the category says nothing of the
    error. Another typed exception with those words stays apart."""
    driver = "The NVIDIA driver on your system is too old (found version 11060). Please update your GPU driver " \
             "by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx"
    warned = _crash("UserWarning", "CUDA initialization: " + driver, engine="pytorch")
    raised = _crash("RuntimeError", driver, engine="pytorch")
    assert score(warned, raised, WEIGHTS).status == "known"
    assert score(_crash("ValueError", driver, engine="pytorch"), raised, WEIGHTS).status != "known"


def test_tensorrt_llms_cpp_exception_and_the_runtimeerror_python_sees_are_one_type():
    """pybind11 turns TensorRT-LLM's TllmException into a RuntimeError; the assertion
    text is the same either way."""
    text = "[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/src/cpp/tensorrt_llm/runtime/worldConfig.cpp:99)"
    cpp = _crash("tensorrt_llm::common::TllmException", text, engine="tensorrt-llm")
    python = _crash("RuntimeError", text, engine="tensorrt-llm")
    assert score(cpp, python, WEIGHTS).status == "known"
    assert score(_crash("ValueError", text, engine="tensorrt-llm"), cpp, WEIGHTS).status != "known"


def _ggml_oom(function: str, call: str, path: str) -> CrashFeatures:
    log = (f"CUDA error: out of memory\n"
           f"  current device: 0, in function {function} at {path}:467\n  {call}\n{path}:77: CUDA error\n")
    return CrashFeatures.from_analysis(analyze(log.encode()))


def test_a_native_out_of_memory_is_one_crash_at_one_site_and_another_elsewhere():
    """Running out of memory names no phase here (kb.core.match.phase_decides); where it
    ran out does: ggml's report of the function and the failing call is the crash site,
    whatever the source path of the build (one allocator's cuMemCreate vs the VMM pool's
    address reservation)."""
    here = _ggml_oom("alloc", "cuMemCreate(&handle, reserve_size, &prop, 0)",
                     "/build/llama_cpp-src/ggml/src/ggml-cuda/ggml-cuda.cu")
    again = _ggml_oom("alloc", "cuMemCreate(&handle, reserve_size, &prop, 0)", "llama/ggml-cuda/ggml-cuda.cu")
    elsewhere = _ggml_oom("ggml_cuda_pool_malloc_vmm", "cuMemAddressReserve(&g_cuda_pool_addr[device], size, 0, 0, 0)",
                          r"C:\src\ollama\llm\llama.cpp\ggml-cuda.cu")
    assert here.frames == again.frames == ["ggml-cuda.cu:alloc"]
    assert score(here, again, WEIGHTS).status == "known"
    assert score(here, elsewhere, WEIGHTS).status != "known"


def test_the_source_line_a_native_error_names_is_its_site():
    """TensorRT-LLM's CUDA check names the call and the source line it failed at."""
    def trt(path: str) -> CrashFeatures:
        return CrashFeatures.from_analysis(analyze(
            ("[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory "
             f"({path}:118)\n").encode()))
    one, two = trt("/src/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h"), trt("/app/runtime/tllmBuffers.h")
    assert one.frames == two.frames == ["tllmBuffers.h:cudaMallocAsync"]
    assert score(one, two, WEIGHTS).status == "known"


def test_later_collectives_that_time_out_are_one_crash_whatever_their_number():
    def timeout(seq: int) -> CrashFeatures:
        return _crash("NCCL watchdog timeout", f"[Rank 3] Watchdog caught collective operation timeout: WorkNCCL("
                      f"SeqNum={seq}, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800023 milliseconds before "
                      "timing out.", engine="pytorch")
    assert score(timeout(4), timeout(1474236), WEIGHTS).status == "known"
    assert score(timeout(1), timeout(1), WEIGHTS).status == "known"


def test_a_clause_of_context_one_release_puts_before_the_error_does_not_hide_it():
    """DeepSpeed's op builder prefixed its error with ">- DeepSpeed Op Builder: "; an excerpt
    cut inside the newer text is still the older release's crash. A clause both texts have,
    naming other things, still tells them apart."""
    older = _crash("Exception", "Installed CUDA version 11.0 does not match the version torch was compiled with "
                                "10.1, unable to compile cuda/cpp extensions without a matching cuda version.",
                   engine="deepspeed")
    newer_cut = _crash("Exception", ">- DeepSpeed Op Builder: Installed CUDA version 12.0 does not match the "
                                    "version torch was compiled with 11.8, unable to", engine="deepspeed")
    assert score(newer_cut, older, WEIGHTS).status == "known"
    assert score(_crash("OSError", "libcudart.so.12: cannot open shared object file: No such file or directory"),
                 _crash("OSError", "libnccl.so.2: cannot open shared object file: No such file or directory"),
                 WEIGHTS).status != "known"


def test_one_tensorrt_error_record_is_one_crash_whichever_logger_printed_it():
    record = ("1: [stdArchiveReader.cpp::stdArchiveReaderInitCommon::47] Error Code 1: Serialization (Serialization "
              "assertion stdVersionRead == kSERIALIZATION_VERSION failed.Version tag does not match. Note: Current "
              "Version: 226, Serialized Engine Version: 228)")
    printed = [f"[TensorRT-LLM][ERROR] {record}",
               f"E1203 08:14:05.772140 1 logging.cc:43] {record}",
               f"[12/03/2024-08:14:05] [TRT] [E] {record}"]
    analyses = [analyze((line + "\n").encode()) for line in printed]
    assert {(a.root_cause.exception, a.root_cause.message) for a in analyses} == {("TensorRT error", record)}
    assert len({a.fingerprint.hash for a in analyses}) == 1


def _reported_oom(line: str) -> CrashFeatures:
    return CrashFeatures.from_analysis(analyze(f"{line}\n".encode()))


def test_a_tensorrt_record_with_or_without_its_code_first_and_its_detail_is_one_crash():
    """TensorRT 8 printed `2: [site] Error Code 2: OutOfMemory (no further information)`,
    TensorRT 10 `[site] Error Code 2: OutOfMemory (Requested size was ... bytes.)`: one
    builder running out of memory. Another error code at another site stays apart, and so
    does one internal error whose detail names another cause."""
    old = _crash("TensorRT error", "2: [virtualMemoryBuffer.cpp::resizePhysical::140] Error Code 2: OutOfMemory "
                                   "(no further information)", engine="tensorrt-llm", phase="startup")
    new = _crash("TensorRT error", "[virtualMemoryBuffer.cpp::resizePhysical::151] Error Code 2: OutOfMemory "
                                   "(Requested size was 16654532608 bytes.)", engine="tensorrt-llm", phase="startup")
    assert score(old, new, WEIGHTS).status == "known"
    no_tactic = _crash("TensorRT error", "10: [optimizer.cpp::computeCosts::4048] Error Code 10: Internal Error "
                                         "(Could not find any implementation for node {ForeignNode[lm_head]}.)",
                       engine="tensorrt-llm", phase="startup")
    assertion = _crash("TensorRT error", "10: [optimizer.cpp::computeCosts::4048] Error Code 10: Internal Error "
                                         "(Assertion rowsA == colsB failed in the gemm plugin.)",
                       engine="tensorrt-llm", phase="startup")
    assert score(old, no_tactic, WEIGHTS).status != "known"
    assert score(no_tactic, assertion, WEIGHTS).status != "known"


def test_a_native_crash_is_known_by_its_backtrace_and_kept_apart_by_another():
    """Two segfaults in UCX are one crash where their backtraces agree (the TCP transport
    copying from GPU memory) and two where the faulting function differs."""
    def segfault(*frames: str) -> CrashFeatures:
        return dataclasses.replace(_crash("SIGSEGV", "process killed by SIGSEGV"),
                                   frames=[f"<native>:{f}" for f in frames])
    tcp = segfault("ucp_tag_send_nbx", "uct_tcp_ep_am_bcopy", "ucs_handle_error")
    assert score(tcp, segfault("uct_tcp_ep_am_bcopy", "ucs_handle_error"), WEIGHTS).status == "known"
    assert score(tcp, segfault("ucp_put_nbx", "uct_cuda_copy_ep_put_short", "ucs_handle_error"),
                 WEIGHTS).status != "known"


def test_a_missing_weight_is_one_crash_whichever_parameter_the_model_names():
    """TGI's "weight X does not exist": the parameter is the model's (a top-level
    `lm_head.weight` as much as `model.layers.0.q_proj.weight`), the failure is one."""
    assert score(_crash("RuntimeError", "weight lm_head.weight does not exist", engine="tgi"),
                 _crash("RuntimeError", "weight encoder.embed_tokens.weight does not exist", engine="tgi"),
                 WEIGHTS).status == "known"


def _mismatch(seq: int, first: str, shape: str, second: str) -> CrashFeatures:
    options = ("TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
               "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))")
    return _crash("RuntimeError", f"Detected mismatch between collectives on ranks. Rank 1 is running collective: "
                                  f"CollectiveFingerPrint(SequenceNumber={seq}, OpType={first}, TensorShape=[{shape}], "
                                  f"TensorDtypes=Float, {options}), but Rank 0 is running collective: "
                                  f"CollectiveFingerPrint(SequenceNumber={seq}, OpType={second}, TensorShape=[1], "
                                  f"TensorDtypes=Long, {options}).", engine="pytorch")


def test_ranks_running_other_collectives_are_one_crash_only_for_the_same_pair_of_collectives():
    """torch's collective-mismatch check: which collectives the ranks disagree on is the
    error; the sequence number and shapes are the run's."""
    broadcast = _mismatch(485, "ALLREDUCE", "25", "BROADCAST")
    assert score(broadcast, _mismatch(12, "ALLREDUCE", "4096", "BROADCAST"), WEIGHTS).status == "known"
    assert score(broadcast, _mismatch(485, "ALLREDUCE", "25", "GATHER"), WEIGHTS).status != "known"


def test_the_c_function_that_reports_an_out_of_memory_is_its_site():
    """ggml reports a failure with its function first (`%s: ` of __func__): two OOMs reported
    by the buffer allocator are one crash though no log says the phase; the graph
    allocator's OOM is another."""
    first = _reported_oom("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 81656.95 MiB on device 0: "
                          "cudaMalloc failed: out of memory")
    again = _reported_oom("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9216.00 MiB on device 1: "
                          "cudaMalloc failed: out of memory")
    other = _reported_oom("ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 1434.06 MiB: "
                          "cudaMalloc failed: out of memory")
    assert first.frames == again.frames == ["<native>:ggml_backend_cuda_buffer_type_alloc_buffer"]
    assert score(first, again, WEIGHTS).status == "known"
    assert score(first, other, WEIGHTS).status != "known"
    # the allocator serves every phase: a log that says it ran out making the KV cache is
    # not known to one that does not say when (it may have been loading the weights)
    assert score(dataclasses.replace(first, phase="kv_cache_profiling"), again, WEIGHTS).status != "known"
    assert score(dataclasses.replace(first, phase="kv_cache_profiling"),
                 dataclasses.replace(again, phase="kv_cache_profiling"), WEIGHTS).status == "known"


def test_one_compiler_message_from_one_kernel_is_known_wherever_the_log_shows_it():
    # the worker's traceback (its frames, the kernel innermost) and a wrapper's quote of it
    worker = dataclasses.replace(_crash("ValueError", _FP8E4NV), frames=[
        "vllm/model_executor/layers/fused_moe/fused_moe.py:invoke_fused_moe_kernel", "<triton>:fused_moe_kernel"])
    quoted = dataclasses.replace(_crash("ValueError", _FP8E4NV), frames=["<triton>:fused_moe_kernel"])
    assert score(worker, quoted).status == "known"


def test_a_result_code_one_runtime_adds_after_the_same_message_is_detail():
    # one SYCL runtime ends what() with its result code and name, another does not
    newer = _crash("sycl::exception", "No kernel named _ZTSZZL17rms_norm_f32_syclPKfPfiif was found -46 "
                                      "(PI_ERROR_INVALID_KERNEL_NAME)", engine="llama.cpp")
    older = _crash("sycl::exception", "No kernel named _ZTSZZL17rms_norm_f32_syclPKfPfiif was found", engine="llama.cpp")
    assert score(newer, older).status == "known"


def test_a_windows_install_path_is_normalized_like_a_unix_one():
    # one wheel's DLL missing a dependency, installed under two users' Windows paths
    first = _crash("FileNotFoundError", r"Could not find module 'C:\Users\ana\AppData\Local\Programs\Python\Python311"
                                        r"\Lib\site-packages\llama_cpp\lib\ggml.dll' (or one of its dependencies).", engine=None)
    second = _crash("FileNotFoundError", r"Could not find module 'D:\ComfyUI_portable\python_embeded\Lib\site-packages"
                                         r"\llama_cpp\lib\ggml.dll' (or one of its dependencies).", engine=None)
    assert first.message_template == second.message_template
    assert score(first, second).status == "known"


def test_a_short_message_that_names_a_thing_is_known_from_other_code():
    # vLLM moved the check between releases: other frames, one failure (WSL2 has no UVA)
    older = dataclasses.replace(_crash("RuntimeError", "UVA is not available"),
                                frames=["vllm/v1/worker/gpu_model_runner.py:__init__", "vllm/utils.py:get_uva_buffer"])
    newer = dataclasses.replace(_crash("RuntimeError", "UVA is not available"),
                                frames=["vllm/v1/worker/gpu/model_runner.py:__init__", "vllm/v1/worker/gpu/buffer_utils.py:__init__"])
    assert score(older, newer).status == "known"


def test_a_path_is_one_path_however_the_reporter_wrote_its_home_or_its_root():
    """An install path varies with the user, and so does how they hide their home ('~/',
    '/home/$USER/') or how far from the root a tool prints a path: the file's name stays."""
    homes = ["/home/$USER/miniconda3/envs/r1/lib/python3.11/site-packages",
             "~/.conda/envs/r1/lib/python3.11/site-packages", "/usr/local/lib/python3.10/dist-packages"]
    templates = {message_template(f"{home}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: "
                                  "_ZN3c105ErrorC2ENS_14SourceLocationE") for home in homes}
    assert templates == {"<path>/flash_attn_2_cuda.so: undefined symbol: torch::<symbol>"}
    assert message_template("backends/src/lib.rs:255: Could not start backend") == \
        message_template("/usr/src/backends/src/lib.rs:255: Could not start backend") == "<path>/lib.rs:<n>: Could not start backend"
    assert message_template("Qwen/Qwen2.5-7B-Instruct does not exist") == "Qwen/Qwen2.5-7B-Instruct does not exist"


def test_two_tracebacks_cut_before_their_type_are_matched_by_the_record_that_named_them():
    """vLLM logs str(e), then the traceback; an excerpt cut inside it has no type on
    either side: the same words are one crash, not two types that differ."""
    def cut(version: str) -> CrashFeatures:
        return CrashFeatures.from_analysis(analyze((
            f"ERROR 03-26 05:25:01 engine.py:389] Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
            f"functions before calling NumCudaDevices() that might have already set an error? Error 804: forward "
            f"compatibility was attempted on non supported HW\n"
            f"ERROR 03-26 05:25:01 engine.py:389] Traceback (most recent call last):\n"
            f'ERROR 03-26 05:25:01 engine.py:389]   File "/usr/lib/python3/dist-packages/vllm-{version}/engine.py", '
            f"line 380, in run_mp_engine\n").encode()))
    one, two = cut("0.8.1"), cut("0.8.2")
    assert one.exception == two.exception == ""
    assert score(one, two, WEIGHTS).status == "known"


def test_sizes_printed_with_the_units_letter_alone_are_sizes():
    assert message_template("Attempting to reserve 6.14G at the bottom of memory. There are 137.37M free.") == \
        "Attempting to reserve <size> at the bottom of memory. There are <size> free."


def _windows_fault(code: str, function: str) -> str:
    return (f'time=2025-07-01T20:41:24.617+08:00 level=INFO source=runner.go:815 msg="starting go runner"\n'
            f"Exception {code} 0x0 0x0 0x7fffb8f22f58\nPC=0x7fffb8f22f58\nsignal arrived during external code execution\n\n"
            f"runtime.cgocall(0x7ff6979bc470, 0xc0005075a0)\n"
            f"\tC:/hostedtoolcache/windows/go/1.24.0/x64/src/runtime/cgocall.go:167 +0x3e fp=0xc000507578 sp=0xc000507510\n"
            f"github.com/ollama/ollama/ml/backend/ggml/ggml/src._Cfunc_{function}(0x19605379220)\n"
            f"\t_cgo_gotypes.go:199 +0x45 fp=0xc0005075a0 sp=0xc000507578 pc=0x7ff697095c05\n")


def test_windows_native_faults_are_crash_signals_whose_site_is_their_identity():
    """An access violation in one library's init and one in another's share their
    exception code and nothing else: like two segfaults whose crash sites the log does not
    name, at most similar (and never an exact route)."""
    first = analyze(_windows_fault("0xc0000005", "ggml_backend_load_all_from_path").encode())
    second = analyze(_windows_fault("0xc0000005", "mlx_random_key").encode())
    assert first.root_cause.exception == "Windows access violation"
    assert first.fingerprint.weak and second.fingerprint.weak
    result = score(CrashFeatures.from_analysis(first), CrashFeatures.from_analysis(second), WEIGHTS)
    assert result.status != "known", result.explanation


def test_a_key_that_failed_its_lookup_where_unknown_is_no_exact_identity():
    """A KeyError's message is its key, and names are replaced in the template: two
    lookups of other keys in other code read alike. Without frames the fingerprint is
    weak (no exact route), as the matcher caps it at similar."""
    first = analyze(b"(Worker_TP12 pid=7) ERROR 03-01 10:00:00 [multiproc_executor.py:671] "
                    b"KeyError: 'model.layers.3.self_attn.indexer.wq_b.weight'\n")
    second = analyze(b"(EngineCore_DP0 pid=9) ERROR 03-02 11:00:00 [core.py:710] KeyError: 'model.layers.92.mlp.gate'\n")
    assert first.fingerprint.hash == second.fingerprint.hash
    assert first.fingerprint.weak and second.fingerprint.weak
    framed = analyze(b'Traceback (most recent call last):\n  File "/x/vllm/model_executor/models/glm4_moe.py", '
                     b"line 501, in load_weights\n    param = params_dict[name]\n"
                     b"KeyError: 'model.layers.3.mlp.experts.w2_weight'\n")
    assert not framed.fingerprint.weak
