"""Corpus-driven tests: one fixture per behaviour in tests/core/fixtures, each a log in
an engine's real format and a reviewed expected result (<name>.json)."""

import json
from pathlib import Path

import pytest

from kb.core.analyze import analyze
from kb.core.evaluate import message_matches
from kb.core.normalize import library_path

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("*.json"))


def _log_for(expected_path: Path) -> bytes:
    for suffix in (".log", ".log.gz"):
        candidate = expected_path.with_name(expected_path.stem + suffix)
        if candidate.exists():
            return candidate.read_bytes()
    raise FileNotFoundError(expected_path)


def _context_value(result, key):
    ctx = result.context
    return {
        "engine": ctx.engine, "engine_version": ctx.engine_version, "model": ctx.model, "model_arch": ctx.model_arch,
        "gpu_name": ctx.gpu.name, "gpu_count": ctx.gpu.count, "tp": ctx.parallel.tp, "dp": ctx.parallel.dp,
        "pp": ctx.parallel.pp, "ep": ctx.parallel.ep, "speculative_method": ctx.speculative.method,
        "cuda_visible_devices": ctx.cuda_visible_devices, "torch_version": ctx.torch_version,
        "dtype": ctx.dtype, "quantization": ctx.quantization, "architecture": ctx.architecture,
        "python_version": ctx.python_version, "draft_model": ctx.speculative.draft_model,
        "num_speculative_tokens": ctx.speculative.num_speculative_tokens,
    }[key]


KNOWN_KEYS = {"root_cause", "symptoms_include", "context", "phase", "redactions_at_least", "absent_strings",
              "seconds_to_crash", "not_root_exceptions", "max_events", "not_root_message_contains", "verdict"}
KNOWN_ROOT_KEYS = {"truncated", "exception", "message", "process", "top_frame", "frames_include", "kind",
                   "message_contains", "frame_count", "confidence_below", "message_contains_any"}


def test_fixture_folder_is_not_empty():
    assert len(CASES) >= 20


@pytest.mark.parametrize("expected_path", CASES, ids=lambda p: p.stem)
def test_fixture(expected_path):
    expected = json.loads(expected_path.read_text())
    assert set(expected) <= KNOWN_KEYS, "an expectation this test would ignore"
    result = analyze(_log_for(expected_path))
    if "verdict" in expected:
        assert result.verdict == expected["verdict"], result.notes
    want = expected["root_cause"]
    root = result.root_cause
    if want is None:  # nothing to name (the cause is not in the log)
        assert root is None, root
        _check_context(expected, result)
        return
    assert set(want) <= KNOWN_ROOT_KEYS, "an expectation this test would ignore"
    assert root is not None, "no root cause found"
    if want.get("exception"):
        assert root.exception == want["exception"], root
    if want.get("message") is not None:
        assert message_matches(root.message, want["message"]), f"{root.message!r} != {want['message']!r}"
    if "process" in want:
        assert root.process == want["process"]
    assert root.truncated == want.get("truncated", False)
    if "message_contains" in want:
        assert want["message_contains"] in root.message
    if "message_contains_any" in want:
        assert any(text in root.message for text in want["message_contains_any"]), root.message
    if "kind" in want:
        assert root.kind == want["kind"]
    if "frame_count" in want:
        assert len(root.frames) == want["frame_count"]
    if "confidence_below" in want:
        assert root.confidence < want["confidence_below"]
    for frame in want.get("frames_include", []):
        assert any(library_path(f.file) == frame["file"] and f.function == frame["function"] for f in root.frames), frame
    for name in expected.get("not_root_exceptions", []):
        assert root.exception != name
    for text in expected.get("not_root_message_contains", []):
        assert text not in root.message
    if "max_events" in expected:
        assert 1 + len(result.symptoms) <= expected["max_events"]
    if want.get("top_frame"):
        assert root.frames, "expected frames"
        top = root.frames[-1]
        assert library_path(top.file) == want["top_frame"]["file"]
        assert top.function == want["top_frame"]["function"]
    _check_context(expected, result)


def _check_context(expected, result):
    """What every fixture may state besides the root cause."""
    symptoms = " | ".join(f"{s.exception}: {s.message}" for s in result.symptoms)
    for text in expected.get("symptoms_include", []):
        assert text in symptoms, f"{text!r} not set aside: {symptoms[:500]}"
    for key, value in (expected.get("context") or {}).items():
        got = _context_value(result, key)
        if isinstance(value, str) and isinstance(got, str):
            assert value.lower() in got.lower() or got.lower() in value.lower(), f"{key}: {got!r} != {value!r}"
        else:
            assert got == value, f"{key}: {got!r} != {value!r}"
    if expected.get("phase"):
        assert result.phase == expected["phase"]
    if expected.get("seconds_to_crash") is not None:
        assert result.timing.seconds_to_crash == pytest.approx(expected["seconds_to_crash"], abs=1.0)
    assert result.redactions >= expected.get("redactions_at_least", 0)
    dumped = json.dumps(result.to_dict())
    for secret in expected.get("absent_strings", []):
        assert secret not in dumped
