"""What the analysis answers when the log holds little: a warning, only wrappers, an
error's traces without its statement. A wrong answer is worse than none."""

from kb.core.analyze import analyze

START = "INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1\n"


def test_a_deprecation_notice_is_never_the_cause():
    log = START + ("/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml "
                   "package is deprecated. Please install nvidia-ml-py instead.\n")
    result = analyze(log.encode())
    assert result.root_cause is None and result.verdict != "found"


def test_a_launch_log_that_holds_no_error_ends_before_it():
    """A launch's log (an engine, stage markers) with no error in it was cut, or the
    process killed, before the error was printed: not captured, and where it stops,
    rather than "no error"."""
    log = ("[2025-03-09 14:18:31 TP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=12.80 GB\n"
           "[2025-03-09 14:18:32 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
           "[2025-03-09 14:40:46 TP0] Capture cuda graph end. Time elapsed: 1334.36 s\n"
           "[2025-03-09 14:40:47 TP1] Init torch distributed begin.\n\n")
    result = analyze(log.encode())
    assert result.root_cause is None and result.verdict == "not_captured"
    assert result.phase == "cuda_graph_capture"
    assert result.fingerprint.signature == "(cause not captured in this log)"
    assert any("ends during cuda graph capture at line 4 (Init torch distributed begin.)" in note
               for note in result.notes), result.notes


def test_text_that_shows_no_launch_is_no_error():
    result = analyze(b"nothing happened here\nand nothing else either\n")
    assert result.root_cause is None and result.verdict == "no_error" and not result.notes


def test_a_warning_that_says_what_is_wrong_is_the_cause_when_nothing_else_is():
    log = START + ("/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:129: UserWarning: CUDA "
                   "initialization: The NVIDIA driver on your system is too old (found version 11040).\n")
    root = analyze(log.encode()).root_cause
    assert (root.exception, root.message.split(":")[0]) == ("UserWarning", "CUDA initialization")


def test_a_warning_whose_text_starts_on_the_next_line_is_read_whole():
    """torch's compute-capability warning begins its text with a newline: the category
    ends its line, the text follows unindented. A lone warning stays the answer only when
    nothing else is (so no launch noise around it here)."""
    log = START + ("/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:262: UserWarning: \n"
                   "NVIDIA RTX PRO 6000 Blackwell Workstation Edition with CUDA capability sm_120 is not compatible "
                   "with the current PyTorch installation.\n"
                   "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n")
    result = analyze(log.encode())
    assert result.verdict == "found"
    assert result.root_cause.exception == "UserWarning"
    assert "sm_120 is not compatible with the current PyTorch installation" in result.root_cause.message


def test_an_error_shown_but_not_stated_is_not_captured():
    """The excerpt ends inside the traceback: its exception line is missing, so the answer
    says so and where it stopped, rather than 'no error'."""
    log = START + ("During handling of the above exception, another exception occurred:\n\n"
                   "Traceback (most recent call last):\n")
    result = analyze(log.encode())
    assert result.root_cause is None
    assert result.verdict == "not_captured"
    assert any("line 2" in note and "not in this excerpt" in note for note in result.notes)


def test_a_progress_bar_another_process_redraws_does_not_continue_a_message():
    log = START + ("ValueError: No available memory for the cache blocks.\n"
                   "Loading safetensors checkpoint shards:  50% Completed | 32/64 [00:31<00:31, 1.0s/it]\n")
    root = analyze(log.encode()).root_cause
    assert root.message == "No available memory for the cache blocks."


def test_a_log_whose_only_error_is_logged_at_warning_level_names_it_on_its_line():
    """WARNING lines are skipped by the pre-filter; a log that holds nothing else reads the
    first and the last of them, numbered where they are, on any page."""
    info = "".join(f"INFO 05-01 12:00:{i % 60:02d} [metrics.py:1] Avg prompt throughput: {i}.0 tokens/s\n"
                   for i in range(20_000))
    warning = ("WARNING 05-01 12:01:00 [_custom_ops.py:21] Failed to import from vllm._C with "
               "ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')\n")
    retried = "WARNING 05-01 12:00:30 [client.py:9] Retrying after a connection error\n"
    log = START + retried * 40 + info + warning + info
    root = analyze(log.encode()).root_cause
    assert root.exception == "ImportError"
    assert root.line_number == 1 + 40 + 20_000 + 1


def test_confidence_falls_when_another_candidate_scores_close():
    one = START + "Traceback (most recent call last):\n  File \"/x/a.py\", line 1, in f\nKeyError: 'w13_weight'\n"
    two = one + "Traceback (most recent call last):\n  File \"/x/b.py\", line 2, in g\nValueError: bad shape\n"
    alone, contested = analyze(one.encode()).root_cause, analyze(two.encode()).root_cause
    assert alone.exception == contested.exception == "KeyError"  # the earliest of equals
    assert contested.confidence < alone.confidence


def test_a_line_that_states_its_own_error_is_not_the_tail_of_the_message_before_it():
    log = ("/usr/lib/python3.10/site-packages/torch/cuda/__init__.py:56: FutureWarning: The pynvml package is deprecated.\n"
           "  import pynvml  # type: ignore[import]\n"
           "engine_cfg:\n"
           "[TM][ERROR] CUDA runtime error: out of memory /opt/lmdeploy/src/turbomind/core/allocator.cc:49\n")
    root = analyze(log.encode()).root_cause
    assert (root.exception, root.message.split(":")[0]) == ("CUDA error", "CUDA runtime error")


def test_a_native_crash_banner_among_native_frames_is_the_cause_not_a_frames_code():
    log = ('  File "<unknown>", line 0, in 0xffffffffffffffff\n\n'
           "!!!!!!! Segfault encountered !!!!!!!\n"
           '  File "<unknown>", line 0, in cuMemcpyBatchAsync\n')
    assert analyze(log.encode()).root_cause.exception == "SIGSEGV"


def test_a_cli_error_line_is_not_an_exception_class_and_a_go_exec_signal_is_named():
    root = analyze(b"Error: llama runner process has terminated: signal: killed\n").root_cause
    assert (root.exception, root.kind) == ("SIGKILL", "signal")


def test_a_mangled_cpp_exception_type_is_demangled():
    log = ("[2023-07-11 15:20:41,680 E 42067 42067] logging.cc:97: Unhandled exception: "
           "N5boost10wrapexceptINS_6system12system_errorEEE. what(): thread: Resource temporarily unavailable\n"
           "[2023-07-11 15:20:41,681 E 42067 42067] logging.cc:97: Unhandled exception: St13runtime_error. "
           "what(): NCCL Error 5: invalid usage\n")
    result = analyze(log.encode())
    names = {result.root_cause.exception} | {s.exception for s in result.symptoms}
    assert names == {"boost::wrapexcept<boost::system::system_error>", "std::runtime_error"}


def test_a_wrapper_quoting_the_error_of_a_traceback_cut_before_its_exception_line_names_it():
    log = ("(VllmWorker TP0 pid=429) ERROR 08-29 02:03:28 [multiproc_executor.py:596] Traceback (most recent call last):\n"
           '(VllmWorker TP0 pid=429) ERROR 08-29 02:03:28 [multiproc_executor.py:596]   File "/x/vllm/worker.py", line 9, in run\n'
           "(EngineCore_0 pid=294) ERROR 08-29 02:03:28 [core.py:700] RuntimeError: Worker failed with error "
           "'CUDA error: an illegal memory access was encountered', please check the stack trace above for the root cause\n")
    root = analyze(log.encode()).root_cause
    assert (root.exception, root.message) == ("CUDA error", "CUDA error: an illegal memory access was encountered")


def test_a_launcher_killing_its_ranks_shows_a_failure_it_does_not_state():
    log = ("[2022-05-15 00:12:57,785] [INFO] [launch.py:178:sigkill_handler] Killing subprocess 97277\n"
           "[2022-05-15 00:12:57,786] [INFO] [launch.py:178:sigkill_handler] Killing subprocess 97278\n")
    result = analyze(log.encode())
    assert result.root_cause is None and result.verdict == "not_captured"


def test_a_native_allocation_failure_and_a_failed_check_are_named():
    oom = b"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 14136.04 MiB on device 0: cudaMalloc failed: out of memory\n"
    check = b"[TM][FATAL] kernels/apply_token_bitmask_inplace_cuda.cu(212): Check failed: logits_shape.first == bitmask_shape.first\n"
    assert analyze(oom).root_cause.exception == "CUDA out of memory"
    assert analyze(check).root_cause.exception == "fatal check"


def test_an_error_record_that_mentions_warning_is_still_an_error_record():
    log = START * 3 + ("ERROR 05-01 12:00:09 [core.py:9] RuntimeError: CUDA error: an illegal memory access "
                       "(env VLLM_LOGGING_LEVEL= WARNING )\n"
                       "ERROR 05-01 12:00:10 [pg.py:9] ProcessGroupNCCL watchdog: NCCL timeout\n")
    assert analyze(log.encode()).root_cause.exception == "RuntimeError"


def test_a_json_record_is_read_from_the_field_that_holds_the_traceback():
    import json

    tb = 'Traceback (most recent call last):\n  File "/x/a.py", line 1, in f\nValueError: bad shard count'
    record = json.dumps({"level": "ERROR", "message": tb, "request": "line of the request\n" * 20})
    assert analyze((record + "\n").encode()).root_cause.exception == "ValueError"


def test_a_two_line_excerpt_whose_first_line_fills_a_terminal_is_not_joined_to_a_crash_report():
    first = ("x" * 60 + " while loading the model shards from the local cache directory")[:120]
    assert analyze((first + "\nAborted (core dumped)\n").encode()).root_cause.exception == "SIGABRT"


def test_a_deprecation_warning_raised_as_an_error_is_the_cause():
    log = ('Traceback (most recent call last):\n  File "/x/train.py", line 3, in <module>\n'
           "DeprecationWarning: torch.cuda.amp.GradScaler(args...) is deprecated\n")
    assert analyze(log.encode()).root_cause.exception == "DeprecationWarning"


def test_more_native_and_launcher_formats_name_their_error():
    cases = {
        b"Error operation not supported at line 351 in file /src/bitsandbytes/csrc/pythonInterface.c\n": "CUDA error",
        b"terminate called after throwing an instance of 'tvm::ffi::Error' what(): Function ffi.GetKwargsObject not found Aborted (core dumped)\n": "tvm::ffi::Error",
        b"/mlc-llm/cpp/llm_chat.cc:163: InternalError: Check failed: (fload_exec.defined()) is false: no vm_load_executable\n": "InternalError",
        b"`RuntimeError: CUDA out of memory. Tried to allocate 256.00 MiB (GPU 0; 14.56 GiB total capacity)\n": "RuntimeError",
        b"ERROR 2025-07-21 14:34:24.934 async_trtllm_engine_factory.py:62] Bfloat16 is only supported on GPUs with compute capability of at least 8.0.\n": "ValueError",
    }
    for log, kind in cases.items():
        root = analyze(log).root_cause
        assert root.exception == kind, (log, root)
    assert analyze(list(cases)[1]).root_cause.message == "Function ffi.GetKwargsObject not found"


def test_an_exception_whose_text_starts_on_the_next_line_is_read_only_with_that_text():
    indented = "RuntimeError:\n        CUDA Setup failed despite GPU being available.\n\n        python -m bitsandbytes\n"
    root = analyze(indented.encode()).root_cause
    assert (root.exception, root.message.split("\n")[0]) == ("RuntimeError", "CUDA Setup failed despite GPU being available.")
    listing = ("ImportError:\n[sgl_kernel] CRITICAL: Could not load any common_ops library!\n"
               "- ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory\n")
    assert analyze(listing.encode()).root_cause.message.startswith("libnvrtc.so.12")
    # torch's CUDA_MISMATCH_MESSAGE begins with a newline: its words on the next line, unindented
    newline_first = ("Building wheel for flash-attn (setup.py): finished with status 'error'\nRuntimeError:\n"
                     "The detected CUDA version (12.4) mismatches the version that was used to compile\n"
                     "PyTorch (11.8). Please make sure to use the same CUDA versions.\n")
    root = analyze(newline_first.encode()).root_cause
    assert (root.exception, root.message.split("\n")[0]) == (
        "RuntimeError", "The detected CUDA version (12.4) mismatches the version that was used to compile")


def test_a_ray_component_check_failure_is_the_cause_behind_the_raylet_died_wrapper():
    log = ("ray.exceptions.LocalRayletDiedError: The task's local raylet died. Check raylet.out for more information.\n"
           "(raylet) [2023-06-27 07:56:04,042 C 1257 1257] (raylet) local_task_manager.cc:431:  "
           "Check failed: task.GetTaskSpecification().PlacementGroupBundleId().first != PlacementGroupID::Nil()\n"
           "(raylet) *** StackTrace Information ***\n")
    root = analyze(log.encode()).root_cause
    assert (root.exception, root.process) == ("fatal check", "raylet")


def test_a_recovered_warning_traceback_does_not_outrank_another_process_error_wherever_it_lands():
    """A recovered WARNING traceback of the engine and the API server's ERROR line
    interleave as the processes wrote them. Wherever the ERROR line falls (before, inside,
    after the traceback), the answer is the ERROR line: the pre-filter passes the lines
    around it, and a WARNING traceback's last line read alone is still logged at WARNING."""
    prefix = "(EngineCore_DP0 pid=4242) WARNING 05-01 10:00:15 [structured_output/__init__.py:120] "
    recovered = [prefix + line for line in (
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/structured_output/backend_xgrammar.py", '
        "line 90, in compile_grammar",
        "    ctx = self.compiler.compile_json_schema(grammar_spec)",
        "RuntimeError: [12:01:07] json_schema_converter.cc:823: Check failed: (schema.is<picojson::object>()) is false")]
    error = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"
    answers = set()
    for at in range(len(recovered) + 1):
        lines = [START.rstrip("\n"), *recovered[:at], error, *recovered[at:]]
        root = analyze(("\n".join(lines) + "\n").encode()).root_cause
        answers.add((root.exception, root.message))
    assert len(answers) == 1
    assert "[Errno 98]" in answers.pop()[1]


def test_a_recovered_warning_line_does_not_take_the_place_of_the_error_a_wrapper_quotes():
    """Only a wrapper that quotes its cause, and another process's recovered WARNING
    exception nearby: the quoted cause is the answer, as it is without the warning."""
    wrapper = ("(EngineCore pid=209) ERROR 05-18 08:21:14 [core.py:1140] RuntimeError: Worker failed with error "
               "'AssertionError: auto_functionalized was not removed', please check the stack trace above "
               "for the root cause\n")
    recovered = ("(EngineCore_DP0 pid=4242) WARNING 05-01 13:51:39 [structured_output/__init__.py:120] "
                 "RuntimeError: [12:01:07] json_schema_converter.cc:823: Check failed: (schema.is<picojson::object>()) is false\n")
    alone = analyze((START + wrapper).encode()).root_cause
    beside = analyze((START + wrapper + recovered).encode()).root_cause
    assert (alone.exception, alone.message) == ("AssertionError", "auto_functionalized was not removed")
    assert (beside.exception, beside.message) == (alone.exception, alone.message)


def _two_errors_then(between: list[str], after: list[str]) -> str:
    first = "OSError: [Errno 28] No space left on device: '/root/.cache/vllm/torch_compile_cache'"
    second = "ValueError: tensor model parallel group is not initialized"
    return START + "\n".join([first, *between, second, *after]) + "\n"


def test_an_error_the_process_went_on_from_is_recovered_but_not_one_the_shutdown_follows():
    """Normal records between two errors: the process went on from the first, and the
    second ended the run. Normal records only after both are the server shutting down:
    the first error is still the trigger."""
    shutdown = ["INFO 05-01 12:00:09 [launcher.py:80] Shutting down FastAPI HTTP server.",
                "INFO:     Application shutdown complete."]
    went_on = ["INFO 05-01 12:00:05 [worker.py:12] retrying with the fallback communicator"]
    assert analyze(_two_errors_then([], shutdown).encode()).root_cause.exception == "OSError"
    assert analyze(_two_errors_then(went_on, shutdown).encode()).root_cause.exception == "ValueError"


def test_an_access_violation_alone_is_the_crash():
    """Without a native report before it, ctypes' access violation is the cause itself."""
    log = ("Traceback (most recent call last):\n"
           '  File "C:\\\\app\\\\serve.py", line 12, in <module>\n'
           "    handle.generate(tokens)\n"
           "OSError: exception: access violation reading 0x0000000000000010\n")
    root = analyze(log.encode()).root_cause
    assert root.exception == "OSError" and root.message.startswith("exception: access violation")


def test_log_records_between_two_rulers_are_no_open_mpi_help_message():
    """An excerpt that starts inside Open MPI's help block takes its closing ruler for an
    opening one: the engine's records up to the next ruler are not an MPI error."""
    ruler = "-" * 74
    log = (f"{ruler}\n"
           "INFO 05-20 07:41:09 [core.py:72] Initializing a V1 LLM engine (v0.9.0) with config: model='m'\n"
           "INFO 05-20 07:41:20 [gpu_model_runner.py:1174] Starting to load model m...\n"
           f"{ruler}\n"
           "There are not enough slots available in the system to satisfy the 8\n"
           "slots that were requested by the application:\n"
           f"{ruler}\n")
    root = analyze(log.encode()).root_cause
    assert root is not None and root.exception == "MPI error"
    assert root.message.startswith("There are not enough slots available")
