"""`kb submit`: an existing log, the same printed answer, clear failures."""

from __future__ import annotations

import json
from pathlib import Path

from client_helpers import free_port, run_kb, spool_entries

LOG = (
    "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] EngineCore failed to start.\n"
    "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] Traceback (most recent call last):\n"
    "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] ValueError: To serve at least one request "
    "with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available "
    "KV cache memory (9.77 GiB).\n"
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
)


def write_log(tmp_path: Path) -> Path:
    path = tmp_path / "vllm.log"
    path.write_text(LOG)
    return path


def test_submit_prints_the_answer(kb_env, standin, tmp_path):
    server = standin()
    done = run_kb(["submit", str(write_log(tmp_path)), "--server", server.url, "--command", "vllm serve x",
                   "--exit-code", "1"], kb_env)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "Root cause\n  ValueError: To serve at least one request" in out
    assert f"{server.url}/incidents/1" in out
    [upload] = server.uploads()
    assert upload["fields"] == {"command": "vllm serve x", "exit_code": "1", "reporter": "ci-tester"}
    assert upload["log"] == LOG


def test_submit_reads_stdin_and_keeps_a_copy(kb_env, standin):
    server = standin()
    done = run_kb(["submit", "-", "--server", server.url, "--json"], kb_env, input=LOG.encode())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["incident"]["id"] == 1
    [copy] = list(Path(kb_env["KB_LOG_DIR"]).iterdir())
    assert copy.read_text() == LOG and f"stdin saved to {copy}" in done.stderr.decode()


def test_submit_to_a_down_server_spools_and_exits_75(kb_env, tmp_path):
    done = run_kb(["submit", str(write_log(tmp_path)), "--server", f"http://127.0.0.1:{free_port()}"], kb_env)
    assert done.returncode == 75
    [entry] = spool_entries(kb_env)
    assert (entry / "log").read_text() == LOG
    assert f"saved to the spool: {entry}" in done.stderr.decode()


def test_submit_refused_exits_1_and_says_why(kb_env, standin, tmp_path):
    server = standin("--status", "413")
    log = write_log(tmp_path)
    done = run_kb(["submit", str(log), "--server", server.url], kb_env)
    assert done.returncode == 1
    stderr = done.stderr.decode()
    assert "the server refused the log: HTTP 413" in stderr and f"the log is kept at {log}" in stderr
    assert spool_entries(kb_env) == []


def test_submit_missing_or_empty_file(kb_env, tmp_path):
    missing = run_kb(["submit", str(tmp_path / "nope.log")], kb_env)
    assert missing.returncode == 1 and "no such file" in missing.stderr.decode()
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    done = run_kb(["submit", str(empty)], kb_env)
    assert done.returncode == 1 and "is empty" in done.stderr.decode()
    assert "Traceback" not in missing.stderr.decode() + done.stderr.decode()


def test_submit_to_an_invalid_server_url_keeps_the_log(kb_env, tmp_path):
    done = run_kb(["submit", str(write_log(tmp_path)), "--server", "ftp://127.0.0.1/"], kb_env)
    assert done.returncode == 75
    assert "invalid server URL" in done.stderr.decode()
    assert len(spool_entries(kb_env)) == 1
