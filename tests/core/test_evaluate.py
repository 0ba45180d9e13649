"""How the evaluator compares an answer with a label: lenient where labels abbreviate,
never where the answer differs."""

from kb.core.evaluate import message_matches

LONG = "Following weights were not initialized from checkpoint: {'blocks.15.w_in.weight', 'blocks.18.proj.bias', 'blocks.3.norm.weight'}"


def test_a_label_that_elides_the_end_of_a_long_message_matches_its_prefix():
    assert message_matches(LONG, "Following weights were not initialized from checkpoint: {'blocks.15.w_in.weight', ...}")
    assert message_matches(LONG, "Following weights were not initialized from checkpoint: {'blocks.15.w_in.weight', …}")


def test_an_elided_label_still_needs_the_text_before_the_elision():
    assert not message_matches(LONG, "Following weights were not loaded: {'blocks.15.w_in.weight', ...}")
    assert not message_matches("Missing key: x", "Missing ...")  # too short a prefix to say anything


def test_a_message_cut_short_matches_as_a_prefix_either_way():
    assert message_matches(LONG[:60], LONG)
    assert message_matches(LONG, LONG[:60])
    assert not message_matches("CUDA out of memory", "CUDA error: an illegal memory access was encountered")


def test_a_native_errors_source_location_is_optional_in_the_label():
    assert message_matches("GGML_ASSERT(i01 >= 0 && i01 < ne01) failed",
                           "ggml-cpu.c:8883: GGML_ASSERT(i01 >= 0 && i01 < ne01) failed")
    assert message_matches("[optimizer.cpp::computeCosts::2011] Error Code 10: Internal Error (Could not find any implementation)",
                           "Error Code 10: Internal Error (Could not find any implementation)")


def test_descriptive_kinds_agree_by_their_words_not_their_spelling():
    from kb.core.evaluate import _kinds_agree

    assert _kinds_agree("NCCL watchdog timeout", "NCCL timeout", "nccl")
    assert not _kinds_agree("Rust panic", "CUDA OOM", "cpp")
    assert _kinds_agree("logged error", "xinference launch error", "log_error")


def test_a_capture_timestamp_the_label_kept_is_not_part_of_the_message():
    got = "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for 6 ms"
    assert message_matches(got, "2023-12-28T13:17:07.318704498Z [E ProcessGroupNCCL.cpp:828] " + got)
    assert not message_matches("[Rank 0] Watchdog caught collective operation timeout",
                               "2023-12-28T13:17:07Z [E ProcessGroupNCCL.cpp:828] Some NCCL operations have failed")


def test_a_label_that_repeats_its_type_in_the_message_under_a_shorter_name():
    from types import SimpleNamespace

    from kb.core.evaluate import _root_matches

    root = SimpleNamespace(exception="OutOfMemoryError", message="CUDA out of memory. Tried to allocate 172.00 MiB",
                           kind="python", truncated=False)
    label = {"exception": "torch.cuda.OutOfMemoryError",
             "message": "OutOfMemoryError: CUDA out of memory. Tried to allocate 172.00 MiB"}
    assert _root_matches(root, label) == (True, True)
    assert _root_matches(root, {**label, "message": "ValueError: CUDA out of memory. Tried to allocate 172.00 MiB"}) == (True, False)


def test_a_label_that_repeats_its_type_as_the_error_line_itself_does():
    """ggml prints `GGML_ASSERT: file:line: cond`: the label and the error's own text both
    start with the kind, so the label is also compared as written."""
    from types import SimpleNamespace

    from kb.core.evaluate import _root_matches

    text = r"GGML_ASSERT: D:\a\llama.cpp\llama.cpp\ggml\src\ggml.c:13968: n_dims <= ne0"
    root = SimpleNamespace(exception="GGML_ASSERT", message=text, kind="cpp", truncated=False)
    assert _root_matches(root, {"exception": "GGML_ASSERT", "message": text}) == (True, True)
    other = text.replace("n_dims <= ne0", "ggml_nelements(a) == ne0*ne1")
    assert _root_matches(root, {"exception": "GGML_ASSERT", "message": other}) == (True, False)


def test_a_context_field_the_log_does_not_show_is_unsaid_not_wrong():
    from kb.core.evaluate import Case, evaluate

    log = b"INFO 05-01 12:00:01 [config.py:2] model='Qwen/Qwen3-8B' vllm==0.9.1\nValueError: bad config\n"
    label = {"id": "c", "engine": "vllm", "model": "Qwen/Qwen3-32B", "gpu": {"name": "H100", "count": 8},
             "phase": "weight_loading", "root_cause": {"exception": "ValueError", "message": "bad config"}}
    context = evaluate([Case("c", log, label)])["context"]
    assert context["engine"] == (1.0, 1, 0)
    assert context["model"] == (0.0, 1, 1)  # said, and not the labeled one
    assert context["gpu_name"] == (0.0, 1, 0)  # never said
    assert context["phase"][2] == 0  # "unknown" is not a claim


def test_a_label_that_copied_the_loggers_header_matches_the_message():
    got = "failed (exitcode: -9) local_rank: 0 (pid: 29066) of binary: /usr/bin/python3"
    assert message_matches(got, "ERROR:torch.distributed.elastic.multiprocessing.api:" + got)
    assert message_matches("CUDA kernel mul_mat_q4_0 has no device code compatible with CUDA arch 520",
                           "ggml-cuda.cu:3211: ERROR: CUDA kernel mul_mat_q4_0 has no device code compatible with CUDA arch 520")
    assert not message_matches(got, "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 3")


def test_a_cut_traceback_whose_message_its_logger_kept_matches_a_descriptive_label():
    from types import SimpleNamespace

    from kb.core.evaluate import _root_matches

    said = "[Rank:0] FATAL ERROR :: MODULE:PT_LAZY Error, ValidateSyncInputTensors tensor_data is empty."
    cut = SimpleNamespace(exception="", message=said, kind="python", truncated=True)
    label = {"exception": "Habana lazy-mode fatal error", "message": said}
    assert _root_matches(cut, label) == (True, True)
    assert _root_matches(SimpleNamespace(**{**vars(cut), "truncated": False}), label)[0] is False


def test_an_error_line_that_repeats_its_kind_matches_a_label_without_it():
    from types import SimpleNamespace

    from kb.core.evaluate import _root_matches

    root = SimpleNamespace(exception="CUDA error", message="CUDA error: out of memory", kind="cuda", truncated=False)
    assert _root_matches(root, {"exception": "CUDA error", "message": "out of memory"}) == (True, True)
    assert _root_matches(root, {"exception": "CUDA error", "message": "an illegal memory access was encountered"})[1] is False


def test_a_line_head_kept_by_either_side_matches_as_a_suffix_either_way():
    """The label may keep what the answer peeled (a shell's "line 40: 7", a "CUDA error 209
    at file:line" location) and the answer may keep a caller's prefix the label dropped."""
    tail = "Illegal instruction ./main --model /models/7B/ggml-model-q4_0.bin"
    assert message_matches(tail, "/app/tools.sh: line 40: 7 " + tail)
    assert message_matches("/app/tools.sh: line 40: 7 " + tail, tail)
    assert not message_matches("no kernel image", "CUDA error 209 at ggml-cuda.cu:6701: no kernel image")  # too short


def test_a_log_tag_or_a_directory_the_label_dropped_inside_the_message_is_not_a_difference():
    got = ("Encountered an error in forwardAsync function: [TensorRT-LLM][ERROR] CUDA runtime error in "
           "::cudaMallocAsync(ptr, n): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:125)")
    assert message_matches(got, "Encountered an error in forwardAsync function: CUDA runtime error in "
                                "::cudaMallocAsync(ptr, n): out of memory (tllmBuffers.h:125)")
    assert not message_matches(got, "Encountered an error in forwardAsync function: Assertion failed: "
                                    "mpiSize == tp * pp (worldConfig.cpp:99)")


def test_a_glog_locator_the_label_kept_is_optional():
    got = "Session::writeBody failed. Error: Bad address (value: 14), total_transferred_bytes_: 0"
    assert message_matches(got, "tcp_transport.cpp:136] Session::writeBody failed. Error: Bad address (value: 14)")
    assert not message_matches(got, "tcp_transport.cpp:136] Session::readBody failed. Error: Connection reset by peer")


def test_a_label_whose_message_keeps_the_answers_kind_matches_it():
    from types import SimpleNamespace

    from kb.core.evaluate import _root_matches

    root = SimpleNamespace(exception="HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", kind="native", truncated=False,
                           message="The agent attempted to access memory beyond the largest legal address.")
    # (the label adds the kernel it ran after the text: the line's head, kind and all, decides)
    label = {"exception": "HSA error", "message": f"{root.exception}: {root.message} (kernel fmoe_bf16_g1u1)"}
    assert _root_matches(root, label)[1] is True
    other = {"exception": "HSA error", "message": "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate"}
    assert _root_matches(root, other)[1] is False


def test_a_label_that_keeps_the_kind_in_the_logs_capitals_matches_it():
    """The analyzer names the kind "CUDA error"; the label keeps the line as flashinfer
    printed it, "CUDA Error: ...": the same text. Another text under that kind is not."""
    from types import SimpleNamespace

    from kb.core.evaluate import _root_matches

    where = "(209) /tmp/build-xyz/flashinfer-0.1.6+cu124torch2.4/include/flashinfer/attention/handler.cuh: line 169"
    root = SimpleNamespace(exception="CUDA error", kind="cuda", truncated=False,
                           message=f"no kernel image is available for execution on the device {where} at function "
                                   "cudaOccupancyMaxActiveBlocksPerMultiprocessor(&num_blocks_per_sm, kernel, num_threads)")
    label = {"exception": "CUDA error",  # (the label's copy stops at the function's name)
             "message": f"CUDA Error: no kernel image is available for execution on the device {where} at function "
                        "cudaOccupancyMaxActiveBlocksPerMultiprocessor"}
    assert _root_matches(root, label) == (True, True)
    other = {"exception": "CUDA error", "message": f"CUDA Error: invalid argument {where}"}
    assert _root_matches(root, other)[1] is False
