"""The text report of an answer, as a pure function of the service's JSON (no I/O): what
curl, `kb submit`, `kb flush`, `kb run`, `kb show` and `kb search` all print."""

from __future__ import annotations

from kb.textreport import (
    WIDTH,
    absolute_url,
    error_report,
    incident_report,
    list_report,
    upload_report,
    upload_summary,
)

ANSWER = {
    "incident": {"id": 17, "url": "/incidents/17", "title": "KV cache too small for max_model_len"},
    "occurrence": {"id": 4},
    "match": {"status": "known", "incident_id": 17, "score": 93.46},
    "analysis": {
        "root_cause": {
            "exception": "ValueError",
            "message": "To serve at least one request with the models's max seq len (131072), "
                       "(16.00 GiB KV cache is needed, which is larger than the available KV cache "
                       "memory (9.77 GiB).\nsecond line",
            "process": "EngineCore_DP0 pid=2211",
            "line_number": 812,
        },
        "context": {"engine": "vllm", "engine_version": "0.10.1", "model": "Qwen/Qwen3-32B",
                    "gpu": {"name": "NVIDIA L40S", "count": 2}, "parallel": {"tp": 2}},
        "phase": "kv_cache_profiling",
    },
    "fixes": [
        {"id": 4, "title": "Lower --max-model-len", "kind": "config", "worked": 3, "failed": 0,
         "upstream_worked": 2, "upstream_failed": 0, "team_worked": 1, "team_failed": 0,
         "description": "Serve shorter sequences: the KV cache of one full-length request must fit. "
                        "Pick the longest context your users need; 32768 fits on two L40S for "
                        "this model.",
         "change": {"flags": ["--max-model-len 32768"]},
         "applies_to": {"engine_versions": ">=0.10"}},
        {"id": 5, "title": "Allow a longer context than the model config", "kind": "workaround",
         "upstream_worked": 0, "upstream_failed": 0, "team_worked": 0, "team_failed": 0,
         "change": {"env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}}},
        {"id": 6, "title": "Upgrade", "kind": "upgrade", "change": {"version": "0.11.0"}},
        {"id": 7, "title": "Patch the check", "kind": "patch",
         "change": {"diff": "--- a/vllm/x.py\n+++ b/vllm/x.py\n@@ -1 +1 @@\n-" + "a" * 150 + "\n+b\n"}},
        {"id": 8, "title": "Run it on SGLang", "kind": "switch_engine",
         "change": {"engine": "sglang", "engine_version": ">=0.5.4"}},
    ],
    "recommendation": {"path": "patch", "fix_id": 4, "reason": "a config change worked 3 times on vLLM 0.10"},
}


def test_full_answer_reads_root_cause_first_and_every_exact_change():
    text = upload_report(ANSWER, base_url="http://kb.internal:8000")
    assert text.endswith("\n") and all(len(line) <= WIDTH for line in text.splitlines())
    lines = text.splitlines()
    assert lines[:3] == [
        "Crash KB: known incident #17, score 93.5",
        "  KV cache too small for max_model_len",
        "  http://kb.internal:8000/incidents/17",
    ]
    root = lines.index("Root cause")
    assert lines[root + 1].startswith("  ValueError: To serve at least one request with the models's")
    assert "    second line" in lines  # the message's own line breaks are kept
    assert "  from     process EngineCore_DP0 pid=2211, line 812" in lines
    assert ("  seen on  vllm 0.10.1 · Qwen/Qwen3-32B · 2 x NVIDIA L40S · tp=2 · phase kv_cache_profiling"
            in lines)
    assert lines.index("Recommendation: patch") > root
    assert "  1. Lower --max-model-len  (recommended)" in lines
    assert "     config · reported upstream: worked 2, failed 0; this team: worked 1, failed 0" in lines
    # nothing cut with "...": the whole description, wrapped, and each change as it is
    flowing = " ".join(text.split())
    assert ANSWER["fixes"][0]["description"] in flowing
    assert "     flags:   --max-model-len 32768" in lines
    assert "     env:     VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in lines
    assert "     workaround · no outcome recorded yet" in lines
    assert "     upgrade · worked 0, failed 0" in lines  # an older service: totals only
    assert "     version: 0.11.0" in lines
    assert "     engine:  sglang >=0.5.4" in lines
    assert "       --- a/vllm/x.py" in lines and "       +b" in lines
    assert "     applies to: versions >=0.10" in lines


def test_known_without_a_fix_says_so():
    answer = {**ANSWER, "fixes": [], "recommendation": {"path": "investigate", "reason": "no fix yet"}}
    text = upload_report(answer)
    assert text.startswith("Crash KB: known incident #17, score 93.5, no fix recorded yet\n")
    assert "  none recorded yet for this incident" in text


def test_new_incident_without_root_cause():
    answer = {
        "incident": {"id": 3, "url": "http://x/incidents/3", "title": "t"},
        "occurrence": {"id": 1},
        "match": {"status": "new", "score": 12.0},
        "analysis": {"root_cause": None, "verdict": "not_captured"},
        "fixes": [],
        "recommendation": {"path": "investigate", "reason": None},
    }
    text = upload_report(answer, base_url="http://other")
    assert text.startswith("Crash KB: new incident #3\n")  # no score for a new incident
    assert "  not captured in this log" in text
    assert "  http://x/incidents/3\n" in text  # absolute URLs are kept as they are
    assert "Recommendation: investigate\n" in text


def test_analysis_without_a_match_stores_nothing():
    answer = {"incident": None, "occurrence": None, "match": {"status": "new", "score": 0},
              "analysis": {"root_cause": {"exception": "E", "message": "m"}}, "fixes": []}
    assert upload_report(answer).startswith("Crash KB: no matching incident (nothing stored)\n")


def test_switch_engine_label_and_long_message_cut():
    answer = {
        "analysis": {"root_cause": {"exception": "E", "message": "m" * 5000}},
        "recommendation": {"path": "switch_engine", "engine": "sglang", "engine_version": "0.5.4",
                           "reason": "no in-engine fix"},
    }
    text = upload_report(answer)
    assert "Recommendation: switch engines to sglang 0.5.4\n  no in-engine fix\n" in text
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "more line(s)" in text


def test_garbage_answers_do_not_raise():
    for answer in ({}, {"incident": "x", "fixes": "nope", "match": [], "analysis": 3},
                   {"fixes": [None, 1]}, {"analysis": {"root_cause": {"exception": 5}}}):
        assert upload_report(answer).startswith("Crash KB:")
        upload_summary(answer)
        incident_report(answer)
        list_report(answer)


def test_summary_line_and_url():
    summary = upload_summary(ANSWER)
    assert summary.startswith("known incident #17, score 93.5 | ValueError: To serve at least")
    assert len(summary) <= WIDTH
    assert absolute_url("incidents/2", "http://h:1/") == "http://h:1/incidents/2"
    assert absolute_url(None, "http://h") is None


def test_incident_and_list_reports():
    detail = {"id": 9, "url": "http://kb/incidents/9", "title": "NCCL timeout", "engine": "vllm",
              "affected_versions": ">=0.9", "phase": "serving", "seeded": True, "occurrence_count": 0,
              "tags": ["nccl"], "summary": "A collective waited too long.", "fixes": [],
              "links": ["https://github.com/vllm-project/vllm/issues/1"],
              "recommendation": {"path": "investigate", "reason": "no fix yet"}}
    text = incident_report(detail)
    assert text.splitlines()[:4] == ["Crash KB incident #9", "  NCCL timeout", "  http://kb/incidents/9",
                                     "  vllm · affected >=0.9 · phase serving"]
    assert "  not seen here yet (curated knowledge)" in text
    assert "Links\n  https://github.com/vllm-project/vllm/issues/1\n" in text
    listing = {"items": [{"id": 9, "title": "NCCL timeout", "engine": "vllm", "occurrences": 2,
                          "fixes": 1}], "total": 1, "page": 1, "per_page": 50}
    assert list_report(listing) == "Crash KB: 1 incident(s)\n  #9     vllm            2x 1 fix    NCCL timeout\n"
    assert error_report(413, "the log is larger than 256 MiB") == (
        "Crash KB: error 413\n  the log is larger than 256 MiB\n")


def test_a_similar_crash_stored_as_a_new_incident_says_both():
    answer = {**ANSWER, "incident": {"id": 31, "url": "/incidents/31", "title": "t"}, "created": True,
              "match": {"status": "similar", "incident_id": 17, "score": 71.04}}
    assert upload_report(answer).startswith("Crash KB: new incident #31, similar to #17, score 71.0\n")
