"""The plain-shell way (bash, tee, PIPESTATUS, curl), run with bash: the documented
snippet as printed in docs/launch-integration.md, and scripts/kb-upload-on-failure.sh."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from client_helpers import FAKE_LAUNCH, GPU, REPO, free_port, run_kb, spool_entries

SCRIPT = REPO / "scripts" / "kb-upload-on-failure.sh"
DOC = REPO / "docs" / "launch-integration.md"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None,
                                reason="needs bash and curl")


def documented_snippet() -> str:
    text = DOC.read_text()
    marker = text.index("<!-- tested: plain-shell-snippet")
    block = re.search(r"```bash\n(.*?)```", text[marker:], re.S)
    assert block, "the tested snippet must follow its marker in a ```bash block"
    return block.group(1)


def fake_vllm(tmp_path: Path, mode: str) -> Path:
    """A real `vllm` executable on PATH that runs the fake multi-process launch."""
    bin_dir = tmp_path / f"vllm-{mode}"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_LAUNCH} {mode}\n")
    exe.chmod(0o755)
    return bin_dir


def run_bash(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", *args], env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


def test_documented_snippet_uploads_a_failed_launch_and_keeps_its_exit_status(kb_env, standin, tmp_path):
    server = standin("--token", "tok")
    env = dict(kb_env, KB_SERVER=server.url, KB_TOKEN="tok",
               PATH=f"{fake_vllm(tmp_path, 'crash')}:{kb_env['PATH']}")
    done = run_bash(["-c", documented_snippet()], env)

    assert done.returncode == 1, done.stderr
    [upload] = server.uploads()
    assert upload["answered"] == 201 and upload["authorization"] == "Bearer tok"
    assert upload["fields"]["exit_code"] == "1"
    assert upload["fields"]["command"] == "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2"
    assert "RuntimeError: Engine core initialization failed" in upload["log"]
    assert "(VllmWorker TP1 pid=" in upload["log"]
    assert '"incident"' in done.stdout.decode()  # curl printed the answer
    [log] = list(Path(kb_env["KB_LOG_DIR"]).iterdir())
    assert log.read_text() == upload["log"]  # the log stays on disk


def test_documented_snippet_keeps_the_log_when_the_server_is_down(kb_env, tmp_path):
    env = dict(kb_env, KB_SERVER=f"http://127.0.0.1:{free_port()}",
               PATH=f"{fake_vllm(tmp_path, 'crash')}:{kb_env['PATH']}")
    done = run_bash(["-c", documented_snippet()], env)
    assert done.returncode == 1
    [log] = list(Path(kb_env["KB_LOG_DIR"]).iterdir())
    assert f"Crash KB upload failed; the log is kept at {log}" in done.stderr.decode()
    assert "Engine core initialization failed" in log.read_text()


def test_documented_snippet_uploads_nothing_on_success(kb_env, standin, tmp_path):
    server = standin()
    env = dict(kb_env, KB_SERVER=server.url, PATH=f"{fake_vllm(tmp_path, 'ok')}:{kb_env['PATH']}")
    done = run_bash(["-c", documented_snippet()], env)
    assert done.returncode == 0
    assert server.uploads() == []


def test_script_uploads_with_host_metadata(kb_env, standin, tmp_path):
    server = standin()
    env = dict(kb_env, KB_SERVER=server.url)
    done = run_bash([str(SCRIPT), sys.executable, str(FAKE_LAUNCH), "crash"], env)

    assert done.returncode == 1, done.stderr
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert "RuntimeError: Engine core initialization failed" in stdout  # passed through
    [upload] = server.uploads()
    fields = upload["fields"]
    assert fields["exit_code"] == "1" and fields["reporter"] == "ci-tester"
    assert fields["command"] == f"{sys.executable} {FAKE_LAUNCH} crash"
    assert fields["gpu"] == GPU and fields["gpu_count"] == "2"
    assert fields["cuda_visible_devices"] == "0,1"
    assert re.fullmatch(r"[0-9a-f]{32}", upload["idempotency_key"])
    assert f"uploaded (HTTP 201): {server.url}/incidents/1" in stderr
    [log] = [p for p in Path(kb_env["KB_LOG_DIR"]).iterdir() if p.suffix == ".log"]
    assert log.read_text() == upload["log"]
    assert json.loads(Path(f"{log}.answer.json").read_text())["incident"]["id"] == 1
    assert spool_entries(kb_env) == []


def test_script_success_uploads_nothing(kb_env, standin):
    server = standin()
    done = run_bash([str(SCRIPT), sys.executable, "-c", "print('fine')"], dict(kb_env, KB_SERVER=server.url))
    assert done.returncode == 0 and done.stdout.decode() == "fine\n"
    assert server.uploads() == []


def test_script_spools_for_kb_flush_when_the_server_is_down(kb_env, standin):
    port = free_port()
    env = dict(kb_env, KB_SERVER=f"http://127.0.0.1:{port}")
    # awkward arguments: quotes, an @ (curl -F would read a file), a ;type=, a newline
    command = ["bash", "-c", 'echo "ValueError: bad @/etc/passwd;type=x"; exit 3', "a\"b\nc"]
    done = run_bash([str(SCRIPT), *command], env)

    assert done.returncode == 3, done.stderr
    [entry] = spool_entries(kb_env)
    assert f"saved to the spool: {entry}" in done.stderr.decode()
    meta = json.loads((entry / "meta.json").read_text())  # valid JSON despite the quoting
    assert meta["fields"]["exit_code"] == "3"
    assert meta["source"] == "kb-upload-on-failure.sh"
    assert (entry / "log").read_text() == "ValueError: bad @/etc/passwd;type=x\n"

    server = standin(port=port)
    flushed = run_kb(["flush", "--server", server.url], env)
    assert flushed.returncode == 0, flushed.stderr
    [upload] = server.uploads()
    assert upload["idempotency_key"] == meta["idempotency_key"]
    assert upload["fields"] == meta["fields"]
    # %q quoting round-trips through bash: the command line is a faithful shell command
    words = subprocess.run(["bash", "-c", f'for w in {upload["fields"]["command"]}; do printf "%s\\0" "$w"; done'],
                           capture_output=True, timeout=10).stdout.split(b"\0")[:-1]
    assert [w.decode() for w in words] == command
    assert spool_entries(kb_env) == []


def test_script_spools_on_5xx_and_keeps_the_log_on_4xx(kb_env, standin):
    down = standin("--status", "503")
    done = run_bash([str(SCRIPT), "sh", "-c", "exit 5"], dict(kb_env, KB_SERVER=down.url))
    assert done.returncode == 5 and len(spool_entries(kb_env)) == 1

    refusing = standin("--status", "422")
    done = run_bash([str(SCRIPT), "sh", "-c", "echo oops; exit 6"], dict(kb_env, KB_SERVER=refusing.url))
    assert done.returncode == 6
    assert "the server refused the log (HTTP 422)" in done.stderr.decode()
    assert len(spool_entries(kb_env)) == 1  # not spooled: the same bytes would be refused again
