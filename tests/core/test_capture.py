"""What the capture layer peels off a line, and what it leaves to the engine's format."""

import pytest

from kb.core.capture import clean, peel, unglued


@pytest.mark.parametrize("level", ["ERROR", " WARN", " INFO", "DEBUG"])
def test_an_engine_loggers_own_timestamp_and_padded_level_are_not_a_capture_prefix(level):
    """Rust's tracing (TGI's launcher and router) pads the level to five columns after its
    RFC 3339 timestamp ("Z  WARN"): the line is the engine's record, not a capture's."""
    line = f"2024-06-03T12:01:17.880214Z {level} text_generation_launcher: Could not import Mamba: x"
    assert peel(line).layers == ()
    assert peel(line).text == line


def test_a_capture_timestamp_before_an_engine_record_is_peeled():
    peeled = peel("2024-06-03T12:01:17.880214Z INFO 06-03 12:01:17 [core.py:90] Initializing")
    assert peeled.layers and peeled.timestamp == "2024-06-03T12:01:17.880214Z"


def test_a_bracketed_name_before_an_engine_record_is_that_records_process_label():
    """A wrapper's `[Stage-0] ` before vLLM's own header labels the process; the same
    brackets before anything that is not a record header are text."""
    peeled = peel("[Stage-0] ERROR 03-23 10:11:12 [diffusion_worker.py:430] RuntimeError: NPU out of memory.")
    assert peeled.stream == "Stage-0"
    assert peeled.text.startswith("ERROR 03-23 10:11:12 [diffusion_worker.py:430] RuntimeError")
    for text in ("[Errno 2] No such file or directory: 'config.json'",
                 "[TRT-LLM] [RANK 0] [E] Assertion failed: mpiSize == tp * pp",
                 "[Stage-0] starting the diffusion worker"):
        assert peel(text).layers == () and peel(text).text == text


@pytest.mark.parametrize("pasted,shown", [
    ("[1;36m(EngineCore_DP0 pid=7)[0;0m ERROR 11-30 14:05:40 [core.py:842] [32mready[0m",
     "(EngineCore_DP0 pid=7) ERROR 11-30 14:05:40 [core.py:842] ready"),
    ("[TM][[31mERROR[0m] CUDA runtime error: out of memory", "[TM][ERROR] CUDA runtime error: out of memory"),
])
def test_colour_codes_a_paste_dropped_the_escape_byte_of_are_read_off(pasted, shown):
    assert clean(pasted) == shown


@pytest.mark.parametrize("text", [
    "tensor shape [3m x 4] at step 12",  # no reset code on the line: nothing was coloured
    "[multiproc_executor.py:375] scheduled [m] [0 m]",  # no digits and `m` together: not a code
])
def test_text_that_only_looks_like_a_colour_code_is_kept(text):
    assert clean(text) == text


def test_a_chained_traceback_flattened_onto_one_line_is_split_into_its_lines():
    """A viewer that turned a chained traceback's line breaks into spaces: each frame and
    its code, each exception line and the chain marker come back as their own lines."""
    flat = ('Traceback (most recent call last): File "/app/load.py", line 3, in fetch cfg = table[name] '
            'KeyError: \'qwen3\' During handling of the above exception, another exception occurred: '
            'Traceback (most recent call last): File "/app/serve.py", line 12, in <module> fetch("qwen3") '
            'ValueError: unknown model qwen3')
    assert unglued(flat) == [
        "Traceback (most recent call last):", '  File "/app/load.py", line 3, in fetch', "    cfg = table[name]",
        "KeyError: 'qwen3'", "During handling of the above exception, another exception occurred:",
        "Traceback (most recent call last):", '  File "/app/serve.py", line 12, in <module>', '    fetch("qwen3")',
        "ValueError: unknown model qwen3"]


def test_a_programs_own_function_names_are_no_capture_label_but_hosts_are():
    """A capture labels lines with a few names; many words in one shape (llama.cpp's
    `load_tensors: `, `llama_context: `) are the program's own prefixes and stay in its text."""
    from kb.core.capture import Profile

    program = ["ggml_vulkan: Found 1 Vulkan devices:", "load_tensors: offloaded 33/33 layers to GPU",
               "llama_context: n_ctx = 32768", "llama_context: n_batch = 2048",
               "ggml_vulkan: Device memory allocation of size 4294967296 failed"]
    assert Profile.learn(program).head_names == []
    hosts = [f"{host}: {text}" for host, text in [("gpu-a", "starting"), ("gpu-b", "starting"),
                                                   ("gpu-a", "ready"), ("gpu-b", "RuntimeError: boom")]]
    assert Profile.learn(hosts).head_names and peel(hosts[-1], Profile.learn(hosts)).text == "RuntimeError: boom"
