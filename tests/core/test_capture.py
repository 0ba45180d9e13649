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
