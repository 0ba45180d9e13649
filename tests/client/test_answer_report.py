"""The printed answer, as a pure function of the service's JSON (no I/O)."""

from __future__ import annotations

from kb.client.report import format_answer, format_summary, incident_url

ANSWER = {
    "incident": {"id": 17, "url": "/incidents/17", "title": "KV cache too small for max_model_len"},
    "match": {"status": "known", "incident_id": 17, "score": 93.46},
    "analysis": {
        "root_cause": {
            "exception": "ValueError",
            "message": "To serve at least one request with the models's max seq len (131072)...\nsecond line",
            "process": "EngineCore_DP0 pid=2211",
        }
    },
    "fixes": [
        {"title": "Lower --max-model-len", "kind": "config", "description": "Set --max-model-len 32768.\nMore."},
        {"title": "Raise --gpu-memory-utilization", "kind": "config", "description": "0.95"},
        {"title": "Use more GPUs", "kind": "workaround", "description": ""},
        {"title": "Quantize the KV cache", "kind": "config", "description": "--kv-cache-dtype fp8"},
    ],
    "recommendation": {"path": "patch", "fix_id": 4, "reason": "a config change worked 3 times on vLLM 0.10"},
}


def test_full_answer():
    text = format_answer(ANSWER, base_url="http://kb.internal:8000")
    assert text.splitlines() == [
        "Crash KB: known incident (score 93.5)",
        "  Root cause:  ValueError: To serve at least one request with the models's max seq len (131072)... …"
        "  [EngineCore_DP0 pid=2211]",
        "  Incident:    #17 KV cache too small for max_model_len",
        "               http://kb.internal:8000/incidents/17",
        "  Fixes:",
        "    1. Lower --max-model-len (config)",
        "       Set --max-model-len 32768. …",
        "    2. Raise --gpu-memory-utilization (config)",
        "       0.95",
        "    3. Use more GPUs (workaround)",
        "    … 1 more on the incident page",
        "  Recommended: patch: a config change worked 3 times on vLLM 0.10",
    ]


def test_new_incident_without_root_cause_or_fixes():
    answer = {
        "incident": {"id": 3, "url": "http://x/incidents/3", "title": "t"},
        "match": {"status": "new", "score": 12.0},
        "analysis": {"root_cause": None},
        "fixes": [],
        "recommendation": {"path": "investigate", "reason": None},
    }
    text = format_answer(answer, base_url="http://other")
    assert "Crash KB: new incident\n" in text  # no score for a new incident
    assert "Root cause:  not found in the log" in text
    assert "http://x/incidents/3" in text  # absolute URLs are kept as they are
    assert "Fixes:       none known yet" in text
    assert text.endswith("Recommended: investigate")


def test_switch_engine_label_and_long_message_cut():
    answer = {
        "analysis": {"root_cause": {"exception": "E", "message": "m" * 1000}},
        "recommendation": {"path": "switch_engine", "reason": "no in-engine fix"},
    }
    text = format_answer(answer)
    assert "Recommended: switch engines: no in-engine fix" in text
    root_line = next(line for line in text.splitlines() if "Root cause" in line)
    assert len(root_line) < 280 and root_line.endswith("…")


def test_garbage_answers_do_not_raise():
    for answer in ({}, {"incident": "x", "fixes": "nope", "match": [], "analysis": 3}, {"fixes": [None, 1]}):
        assert format_answer(answer).startswith("Crash KB:")
        format_summary(answer)


def test_summary_line_and_url():
    assert format_summary(ANSWER, base_url="http://kb/") == (
        "known incident (score 93.5) | http://kb/incidents/17 | ValueError: To serve at least one request with "
        "the models's max seq len (131072)... …  [EngineCore_DP0 pid=2211]"
    )
    assert incident_url({"incident": {"url": "incidents/2"}}, "http://h:1/") == "http://h:1/incidents/2"
    assert incident_url({}, "http://h") is None
