"""The `kb analyze` and `kb eval` commands: the JSON contract other tools read, stdin,
clear errors, and the evaluation figures on a labeled folder."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from kb.cli import main

ROOT = Path(__file__).resolve().parents[2]
KB = [sys.executable, "-m", "kb.entry"]
FIXTURES = Path(__file__).parent / "fixtures"
WRAPPED = FIXTURES / "vllm-v1-worker-root-cause-behind-enginecore-wrapper.log"


def test_analyze_json_has_the_documented_keys():
    result = CliRunner().invoke(main, ["analyze", str(WRAPPED), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["fingerprint"]) >= {"version", "hash", "signature"}
    root = data["root_cause"]
    assert set(root) >= {"exception", "message", "process", "frames", "line_number", "truncated", "confidence"}
    assert root["exception"] == "AttributeError"
    assert all(not f["file"].startswith("/") for f in root["frames"])  # library-relative
    assert {"exception", "message", "process"} <= set(data["symptoms"][0])
    assert any("Engine core initialization failed" in s["message"] for s in data["symptoms"])
    ctx = data["context"]
    assert set(ctx) >= {"engine", "engine_version", "model", "model_arch", "gpu", "parallel"}
    assert set(ctx["parallel"]) == {"tp", "dp", "pp", "ep"}
    assert data["phase"] and "seconds_to_crash" in data["timing"] and "redactions" in data


def test_analyze_reads_stdin_and_prints_root_cause_first():
    result = CliRunner().invoke(main, ["analyze", "-"], input=WRAPPED.read_bytes())
    assert result.exit_code == 0
    assert result.output.startswith("ROOT CAUSE  AttributeError")
    assert "SET ASIDE" in result.output


def test_analyze_missing_file_is_a_clear_error():
    result = CliRunner().invoke(main, ["analyze", "/nonexistent/vllm.log"])
    assert result.exit_code != 0
    assert "cannot read" in result.output and "Traceback" not in result.output


def test_eval_prints_the_figures(tmp_path):
    # two cases of one class and a singleton, in the corpus format
    cases = {
        "a": ("vllm-two-workers-tracebacks-interleaved", "oom"),
        "b": ("noise-crlf-line-endings-and-deprecation-warnings", "oom"),
        "c": ("tensorrt-llm-cpp-error-with-numbered-stack", "mpi"),
    }
    for case_id, (fixture, failure_class) in cases.items():
        expected = json.loads((FIXTURES / f"{fixture}.json").read_text())
        shutil.copy(FIXTURES / f"{fixture}.log", tmp_path / f"{case_id}.log")
        label = {"id": case_id, "engine": expected["context"].get("engine"), "failure_class": failure_class,
                 "root_cause": {"exception": expected["root_cause"].get("exception"),
                                "message": expected["root_cause"].get("message", "")},
                 "log_is_truncated": False}
        (tmp_path / f"{case_id}.json").write_text(json.dumps(label))
    result = CliRunner().invoke(main, ["eval", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "cases: 3" in result.output
    assert "root cause (type and message):" in result.output
    assert "grouping through the service (leave-one-out" in result.output
    assert "one-of-a-kind kept new:                             100.0% of 1" in result.output
    assert "(RR@1):" in result.output and "of 2" in result.output


def test_eval_on_an_empty_folder_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(main, ["eval", str(tmp_path)])
    assert result.exit_code != 0 and "no labeled cases" in result.output


def test_console_entry_fast_path_prints_the_same_json_as_the_command():
    import subprocess
    import sys

    fast = subprocess.run([sys.executable, "-c", "from kb.entry import main; main()", "analyze", str(WRAPPED), "--json"],
                          capture_output=True, check=True)
    via_click = CliRunner().invoke(main, ["analyze", str(WRAPPED), "--json"])
    assert json.loads(fast.stdout) == json.loads(via_click.output)


def test_console_entry_falls_back_to_the_command_for_errors_and_help():
    import subprocess
    import sys

    entry = [sys.executable, "-c", "import sys; sys.argv[0] = 'kb'; from kb.entry import main; main()"]
    missing = subprocess.run([*entry, "analyze", "/nonexistent/vllm.log"], capture_output=True, text=True)
    assert missing.returncode == 1
    assert "cannot read /nonexistent/vllm.log" in missing.stderr and "Traceback" not in missing.stderr
    helped = subprocess.run([*entry, "analyze", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "Usage:" in helped.stdout


def test_analyze_prints_a_seed_examples_fix_offline(tmp_path):
    """With no server anywhere: the bundled seeds answer, through the service's own
    matching and advice on a cached SQLite copy; --no-kb and --json leave it out."""
    import yaml

    seed = yaml.safe_load((ROOT / "seeds" / "vllm" / "vllm-api-server-port-already-in-use.yaml").read_text())
    log = tmp_path / "vllm.log"
    log.write_text(seed["examples"][-1]["log"])
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache"), "KB_SEEDS_DIR": str(ROOT / "seeds")}
    runs = [subprocess.run([*KB, "analyze", str(log), *extra], capture_output=True, env=env, timeout=120)
            for extra in ([], [], ["--no-kb"], ["--json"])]
    assert [r.returncode for r in runs] == [0, 0, 0, 0]
    first, cached, no_kb, as_json = (r.stdout.decode() for r in runs)
    assert first == cached  # the second run reads the cached database
    advice = first[first.index("Crash KB, bundled knowledge (offline): known incident, score 100.0\n"):]
    assert "  seed vllm-api-server-port-already-in-use\n" in advice
    assert "Recommendation: patch" in advice and "flags:   --port 8001" in advice
    assert first.startswith(no_kb.rstrip("\n")) and "bundled knowledge" not in no_kb
    assert "bundled knowledge" not in as_json and json.loads(as_json)["root_cause"]["exception"] == "OSError"
    assert len(list((tmp_path / "cache").glob("seed-kb-*.sqlite3"))) == 1


def test_eval_against_seeds_goes_through_the_service_and_judges_by_tags(tmp_path):
    """Two cases of a class a sample seed is tagged with (its own examples, so known and
    right), one case of a class no seed covers: listed as uncovered."""
    import yaml

    sample = ROOT / "tests" / "service" / "seeds_sample"
    seed = yaml.safe_load((sample / "vllm" / "sample-kv-cache-no-memory.yaml").read_text())
    cases = {"kv-a": (seed["examples"][0]["log"], "kv-cache"),
             "kv-b": (seed["examples"][-1]["log"], "kv-cache"),
             "odd": ("RuntimeError: something no seed knows about\n", "unheard-of-class")}
    for case_id, (log, failure_class) in cases.items():
        (tmp_path / f"{case_id}.log").write_text(log)
        (tmp_path / f"{case_id}.json").write_text(json.dumps(
            {"id": case_id, "failure_class": failure_class, "root_cause": None}))
    result = CliRunner().invoke(main, ["eval", str(tmp_path), "--no-grouping", "--against-seeds", str(sample)])
    assert result.exit_code == 0, result.output
    assert "seed knowledge base (3 incidents), through the service's matching:" in result.output
    assert "recurring-class cases: 100.0% of 2" in result.output
    assert "a wrong incident's fix as known, all cases:               0.0%\n" in result.output
    assert "corpus classes without a seed incident: 1 of 2 (0 recurring)\n    unheard-of-class (1)\n" in result.output


def test_eval_names_a_label_field_of_the_wrong_shape(tmp_path):
    (tmp_path / "a.log").write_text("RuntimeError: boom\n")
    (tmp_path / "a.json").write_text(json.dumps({"id": "a", "root_cause": {"exception": "RuntimeError", "message": "boom"},
                                                 "parallel": 4}))
    result = CliRunner().invoke(main, ["eval", str(tmp_path), "--no-grouping"])
    assert result.exit_code == 1
    assert "a.json: 'parallel' must be an object or null, got int (4)" in result.output


def test_console_entry_keeps_compiled_patterns_and_answers_the_same_with_them(tmp_path):
    """The fast path writes the programs it compiled to the cache directory and reads them
    on the next run; a damaged cache file is compiled again. Same JSON every time."""
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path)}
    entry = [sys.executable, "-c", "from kb.entry import main; main()", "analyze", str(WRAPPED), "--json"]
    first = subprocess.run(entry, capture_output=True, check=True, env=env).stdout
    (programs,) = tmp_path.glob("re-*.marshal")
    cached = subprocess.run(entry, capture_output=True, check=True, env=env).stdout
    programs.write_bytes(b"\x00not a marshal dump")
    damaged = subprocess.run(entry, capture_output=True, check=True, env=env).stdout
    assert json.loads(first) == json.loads(cached) == json.loads(damaged)
    assert json.loads(first)["root_cause"]["exception"]
    assert programs.stat().st_size > 10_000  # written again in full after the damaged read
