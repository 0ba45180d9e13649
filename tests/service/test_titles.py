"""The titles new incidents get: wrapper-only logs say the cause was not captured, an
ERROR line is its own message, and long titles end at a word."""

from __future__ import annotations

from kb.core.analyze import analyze
from kb.services.ingest import TITLE_CHARS, short_title, title_for
from tests.service.logs import vllm_log
from tests.service.test_log_search import WRAPPER_ONLY


def test_a_wrapper_only_log_is_titled_as_not_captured():
    title = title_for(analyze(WRAPPER_ONLY.encode()))
    assert title.startswith("Cause not captured: RuntimeError: Engine core initialization failed")
    assert not title.startswith("ERROR") and "logged error" not in title


def test_an_error_line_without_an_exception_is_its_message_cut_at_a_word():
    words = " ".join(f"word{n}" for n in range(80))
    log = f"INFO start\nERROR 11-30 10:00:05 [core.py:700] EngineCore stopped: {words}\n"
    title = title_for(analyze(log.encode()))
    assert title.startswith("EngineCore stopped: word0 word1")
    assert len(title) <= TITLE_CHARS and title.endswith("…")
    assert title[:-1].split()[-1] in words.split()  # the last word is whole


def test_short_titles_are_kept_and_a_crash_keeps_its_signature():
    assert short_title("  a   b ") == "a b"
    assert short_title("x" * 400).endswith("…") and len(short_title("x" * 400)) == TITLE_CHARS
    assert title_for(analyze(vllm_log().encode())).startswith("ValueError: No available memory")
