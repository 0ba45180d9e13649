"""What the capture layer peels off a line, and what it leaves to the engine's format."""

import pytest

from kb.core.capture import peel


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
