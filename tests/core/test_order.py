"""A log copied from a viewer that lists the newest line first (kb.core.order) is read from
its last line up and gives the answer the log in its own order gives; a log in its own
order is never taken for one."""

from pathlib import Path

import pytest

from kb.core.analyze import Analyzer, analyze, inflate
from kb.core.shapes import SHAPES, recapture

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted(p for p in FIXTURES.iterdir() if p.name.endswith((".log", ".log.gz")))
TIMESTAMPED_LINES = 12  # enough timestamped steps for the order to show (kb.core.order)
TURNED = "newest line first (a log viewer's copy): read from the last line up"


def _newest_first(data: bytes) -> bytes:
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()
    return b"\n".join(reversed(lines)) + b"\n"


def _answer(analysis):
    root = analysis.root_cause
    return None if root is None else (root.exception, " ".join(root.message.split()), root.line_number)


def _stamped(path: Path) -> bytes:
    return recapture(inflate(path.read_bytes()), "kubectl-timestamps", seed=5)


# the fixtures long enough for their timestamps to tell the order
LONG = [path for path in LOGS if _stamped(path).count(b"\n") >= TIMESTAMPED_LINES]


@pytest.mark.parametrize("path", LONG, ids=lambda p: p.name)
def test_a_timestamped_log_turned_newest_first_gives_the_same_answer(path):
    """Loki, Kibana and cloud consoles show each line's time: the copy runs back in time."""
    stamped = _stamped(path)
    turned = analyze(_newest_first(stamped))
    assert TURNED in turned.capture
    in_order = _answer(analyze(stamped))
    lines = stamped.count(b"\n")  # numbered in the log as given: the turned one
    assert _answer(turned) == (in_order and (*in_order[:2], in_order[2] and lines - in_order[2] + 1))


def test_a_python_traceback_printed_upside_down_is_read_from_the_end():
    log = "\n".join([
        "asyncio.exceptions.TimeoutError",
        "raise exceptions.TimeoutError() from exc",
        'File "/usr/lib/python3.10/asyncio/tasks.py", line 458, in wait_for',
        "has_requests_in_progress = await asyncio.wait_for(",
        'File "/workspace/vllm/engine/async_llm_engine.py", line 479, in run_engine_loop',
        "Traceback (most recent call last):",
        "INFO 05-01 12:00:00 [engine.py:267] Added request chatcmpl-1.",
    ]).encode()
    analysis = analyze(log + b"\n")
    assert TURNED in analysis.capture
    root = analysis.root_cause
    assert (root.exception, root.line_number) == ("asyncio.exceptions.TimeoutError", 1)  # as given
    assert [f.function for f in root.frames] == ["run_engine_loop", "wait_for"]


@pytest.mark.parametrize("shape", ("plain", *SHAPES))
def test_no_fixture_in_its_own_order_is_taken_for_newest_first(shape):
    for path in LOGS:
        plain = inflate(path.read_bytes())
        analysis = analyze(plain if shape == "plain" else recapture(plain, shape, seed=3))
        assert TURNED not in analysis.capture, path.name


def test_a_newest_first_log_too_long_to_hold_is_read_as_given(monkeypatch):
    from kb.core import analyze as module

    monkeypatch.setattr(module, "MAX_REVERSED", 2048)
    turned = _newest_first(_stamped(LONG[0]) * 40)
    analyzer = Analyzer()
    for start in range(0, len(turned), 1000):
        analyzer.feed(turned[start:start + 1000])
    analysis = analyzer.finish()
    assert TURNED not in analysis.capture
    assert any("too long to turn around" in note for note in analysis.notes)
