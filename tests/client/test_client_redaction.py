"""The client redacts before anything is written or sent, with the core's rules: the log
`kb run` saves, the spool entries (log and meta.json) of `kb run` and `kb submit` against a
server that is down, stdin saved by `kb submit -`, what `kb flush` sends of an entry the
shell script spooled raw, and what reaches a server. The terminal still shows the
command's own output (that is the user's screen, not a copy)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from client_helpers import free_port, run_kb, saved_log, spool_entries

from tests.service.planted import (
    ALL_SECRETS,
    API_KEY_FLAG,
    FIELD_SECRETS,
    HF,
    HF_FLAG,
    WANDB_ENV,
    non_secret_log,
    vllm_crash_log,
)

PY = sys.executable


def _leaks(data: bytes | str) -> list[str]:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [secret[:12] + "..." for secret in ALL_SECRETS if secret in text]


def _entry_leaks(entry: Path) -> list[str]:
    assert (entry / "log").is_file() and (entry / "meta.json").is_file()
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["redacted"] is True
    return _leaks((entry / "log").read_bytes()) + _leaks(json.dumps(meta))


def _launcher(tmp_path: Path, log: str) -> list[str]:
    """A command that prints `log` as a crashing engine would, with secrets on its own
    command line, and exits 1: the launch script's `set -x` trace on stderr (as bash
    writes it), the rest on stdout, the two interleaved."""
    path = tmp_path / "engine-output.txt"
    path.write_text(log)
    script = tmp_path / "engine.py"
    script.write_text("import sys\n"
                      f"lines = open({str(path)!r}).read().splitlines(keepends=True)\n"
                      "for line in lines:\n"
                      "    stream = sys.stderr if line.startswith('+ ') else sys.stdout\n"
                      "    stream.write(line); stream.flush()\n"
                      "sys.exit(1)\n")
    return ["env", f"HF_TOKEN=hf_{HF}", f"WANDB_API_KEY={WANDB_ENV}", PY, str(script),
            "--api-key", API_KEY_FLAG, "--hf-token", HF_FLAG]


def test_kb_run_against_a_down_server_spools_and_saves_nothing_secret(kb_env, tmp_path):
    done = run_kb(["run", "--server", f"http://127.0.0.1:{free_port()}", "--", *_launcher(tmp_path, vllm_crash_log())],
                  kb_env)
    assert done.returncode == 1, done.stderr
    [entry] = spool_entries(kb_env)
    assert not _entry_leaks(entry)
    meta = json.loads((entry / "meta.json").read_text())
    assert "--api-key ***" in meta["fields"]["command"] and "HF_TOKEN=***" in meta["host"]["command"]
    log = saved_log(done.stderr.decode())
    assert not _leaks(log.read_bytes())
    assert b"Traceback (most recent call last)" in log.read_bytes() and b"--api-key ***" in log.read_bytes()
    assert (entry / "log").read_bytes() == log.read_bytes()


def test_kb_run_sends_nothing_secret(kb_env, standin, tmp_path):
    server = standin()
    done = run_kb(["run", "--server", server.url, "--", *_launcher(tmp_path, vllm_crash_log())], kb_env)
    assert done.returncode == 1, done.stderr
    [upload] = server.uploads()
    assert not _leaks(upload["log"]) and not _leaks(json.dumps(upload["fields"]))
    assert not _leaks(saved_log(done.stderr.decode()).read_bytes())


def test_kb_submit_against_a_down_server_spools_nothing_secret(kb_env, tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(vllm_crash_log())
    command = FIELD_SECRETS["command"][0]
    done = run_kb(["submit", str(log), "--server", f"http://127.0.0.1:{free_port()}", "--command", command,
                   "--exit-code", "1"], kb_env)
    assert done.returncode == 75, done.stderr
    [entry] = spool_entries(kb_env)
    assert not _entry_leaks(entry)
    assert log.read_text() == vllm_crash_log()  # the user's own file is not changed
    assert [p.name for p in Path(kb_env["KB_SPOOL_DIR"]).iterdir() if p.name.startswith(".")] == []


def test_kb_submit_stdin_keeps_a_redacted_copy_and_sends_one(kb_env, standin, tmp_path):
    server = standin()
    command = FIELD_SECRETS["command"][0]
    done = run_kb(["submit", "-", "--server", server.url, "--command", command], kb_env,
                  input=vllm_crash_log().encode())
    assert done.returncode == 0, done.stderr
    [copy] = list(Path(kb_env["KB_LOG_DIR"]).iterdir())
    assert not _leaks(copy.read_bytes())
    [upload] = server.uploads()
    assert not _leaks(upload["log"]) and not _leaks(json.dumps(upload["fields"]))
    assert upload["fields"]["command"].startswith("env HF_TOKEN=*** WANDB_API_KEY=*** vllm serve")


def test_kb_submit_of_a_gzip_log_sends_it_redacted(kb_env, standin, tmp_path):
    import gzip

    server = standin()
    log = tmp_path / "vllm.log.gz"
    log.write_bytes(gzip.compress(vllm_crash_log().encode()))
    done = run_kb(["submit", str(log), "--server", server.url], kb_env)
    assert done.returncode == 0, done.stderr
    [upload] = server.uploads()
    assert "Traceback (most recent call last)" in upload["log"] and not _leaks(upload["log"])


def test_a_log_without_secrets_is_sent_byte_for_byte(kb_env, standin, tmp_path):
    server = standin()
    log = tmp_path / "vllm.log"
    log.write_bytes(non_secret_log().encode())
    done = run_kb(["submit", str(log), "--server", server.url], kb_env)
    assert done.returncode == 0, done.stderr
    [upload] = server.uploads()
    assert upload["log"] == non_secret_log()


def test_kb_flush_redacts_an_entry_the_shell_script_spooled_raw(kb_env, standin):
    """scripts/kb-upload-on-failure.sh has no redaction: its entries carry no
    `"redacted": true`, and kb flush masks them in place before sending."""
    entry = Path(kb_env["KB_SPOOL_DIR"]) / "20250101T030000000000-shellscript01"
    entry.mkdir(parents=True)
    (entry / "log").write_text(vllm_crash_log())
    (entry / "meta.json").write_text(json.dumps({
        "version": 1, "idempotency_key": "shell-0001", "source": "kb-upload-on-failure.sh", "attempts": 0,
        "fields": {"command": FIELD_SECRETS["command"][0], "exit_code": "1"}}))
    server = standin()
    done = run_kb(["flush", "--server", server.url], kb_env)
    assert done.returncode == 0, done.stderr
    [upload] = server.uploads()
    assert not _leaks(upload["log"]) and not _leaks(json.dumps(upload["fields"]))
    assert upload["fields"]["command"].startswith("env HF_TOKEN=*** ")
