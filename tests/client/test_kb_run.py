"""`kb run` wrapping a real (fake) multi-process launch, against a real HTTP server process."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from client_helpers import (
    FAKE_LAUNCH,
    GPU,
    KB,
    free_port,
    pid_alive,
    run_kb,
    saved_log,
    spool_entries,
    wait_until,
)

PY = sys.executable


def launch(mode: str, *extra: str) -> list[str]:
    return [PY, str(FAKE_LAUNCH), mode, *extra]


def test_crash_uploads_the_log_with_host_metadata_and_prints_the_answer(kb_env, standin):
    server = standin()
    done = run_kb(["run", "--server", server.url, "--", *launch("crash")], kb_env)

    assert done.returncode == 1, done.stderr
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    # Output passed through: log lines on stdout, the API server traceback on stderr.
    assert "(VllmWorker TP1 pid=" in stdout and "torch.OutOfMemoryError: CUDA out of memory" in stdout
    assert "RuntimeError: Engine core initialization failed. See root cause above." in stderr

    [upload] = server.uploads()
    fields = upload["fields"]
    assert fields["exit_code"] == "1"
    assert fields["command"].startswith(PY) and fields["command"].endswith("fake_launch.py crash")
    assert fields["host"] == socket.gethostname()
    assert fields["reporter"] == "ci-tester"
    assert fields["gpu"] == GPU and fields["gpu_count"] == "2"
    assert upload["idempotency_key"]

    # The uploaded log is the saved log, and it holds every process's lines.
    log_path = saved_log(stderr)
    saved = log_path.read_bytes()
    assert hashlib.sha256(saved).hexdigest() == upload["log_sha256"]
    text = saved.decode()
    for needle in (
        "(VllmWorker TP0 pid=",
        "(VllmWorker TP1 pid=",
        "(EngineCore_0 pid=",
        "Exception: WorkerProc initialization failed",
        "RuntimeError: Engine core initialization failed",
    ):
        assert needle in text

    # The answer: root cause (found by the server), absolute incident URL, recommendation.
    assert "Root cause\n  torch.OutOfMemoryError: CUDA out of memory" in stderr
    assert f"{server.url}/incidents/1" in stderr
    assert "Recommendation: investigate" in stderr
    assert spool_entries(kb_env) == []


def test_a_command_that_succeeds_uploads_nothing_and_progress_bars_pass_through(kb_env, standin):
    server = standin()
    done = run_kb(["run", "--server", server.url, "--", *launch("ok")], kb_env)

    assert done.returncode == 0, done.stderr
    assert server.uploads() == []
    assert spool_entries(kb_env) == []
    # The terminal gets the raw bytes (the bar animates) ...
    assert b"\rLoading safetensors checkpoint shards:  25% Completed | 1/4\r" in done.stderr
    # ... the saved log only the bar's final state.
    text = saved_log(done.stderr.decode()).read_text()
    assert "Loading safetensors checkpoint shards: 100% Completed | 4/4\n" in text
    assert "25% Completed" not in text and "\r" not in text


def test_hang_after_a_fatal_line_uploads_then_stops_every_process(kb_env, standin, tmp_path):
    server = standin()
    pids = tmp_path / "pids"
    started = time.monotonic()
    done = run_kb(
        ["run", "--server", server.url, "--hang-timeout", "1", "--kill-grace", "2", "--",
         *launch("hang", "--pids", str(pids))],
        kb_env,
        timeout=60,
    )

    assert done.returncode == 124, done.stderr
    assert time.monotonic() - started < 30
    stderr = done.stderr.decode()
    assert "after a fatal line" in stderr and "Engine core initialization failed" in stderr
    [upload] = server.uploads()
    assert "exit_code" not in upload["fields"]  # it never exited by itself
    assert "RuntimeError: Engine core initialization failed" in upload["log"]
    assert "torch.OutOfMemoryError" in upload["log"]
    # main process and both workers (same process group) are gone
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 3
    wait_until(lambda: not any(pid_alive(p) for p in recorded), 10, "the command's processes to die")


def test_never_ready_uploads_and_stops_the_command(kb_env, standin, tmp_path):
    server = standin()
    pids = tmp_path / "pids"
    closed = f"http://127.0.0.1:{free_port()}/health"  # nothing listens: never ready
    done = run_kb(
        ["run", "--server", server.url, "--ready-url", closed, "--ready-timeout", "1.5", "--kill-grace", "2",
         "--", *launch("serve", "--pids", str(pids))],
        kb_env,
    )

    assert done.returncode == 124, done.stderr
    assert "did not answer 2xx within 1.5s" in done.stderr.decode()
    [upload] = server.uploads()
    assert "Waiting for 1 local, 0 remote core engine proc(s) to start." in upload["log"]
    recorded = [int(p) for p in pids.read_text().split()]
    wait_until(lambda: not any(pid_alive(p) for p in recorded), 10, "the command's processes to die")


def test_ready_in_time_and_exit_zero_uploads_nothing(kb_env, standin):
    server = standin()
    done = run_kb(
        ["run", "--server", server.url, "--ready-url", f"{server.url}/healthz", "--ready-timeout", "30",
         "--", PY, "-c", "import time; time.sleep(1)"],
        kb_env,
    )
    assert done.returncode == 0, done.stderr
    assert server.uploads() == []


def _start_kb_run(kb_env, server_url: str, *command: str, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    # Its own session, like a shell job: a terminal's Ctrl-C goes to kb's process group only.
    return subprocess.Popen(
        [*KB, "run", "--server", server_url, *extra, "--", *command],
        env=kb_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_ctrl_c_reaches_every_process_of_the_command(kb_env, standin, tmp_path):
    server = standin()
    pids, marker = tmp_path / "pids", tmp_path / "marker"
    kb = _start_kb_run(kb_env, server.url, *launch("serve", "--pids", str(pids), "--marker", str(marker)))
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, 20, "the command to start")
        os.killpg(kb.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        stdout, stderr = kb.communicate(timeout=30)
    finally:
        kb.kill()
    assert kb.returncode == 128 + signal.SIGINT, stderr
    seen = set(marker.read_text().split("\n")) - {""}
    assert seen == {"main SIGINT", "worker0 SIGINT", "worker1 SIGINT"}
    assert server.uploads() == []  # stopping a command on purpose is not a crash
    assert saved_log(stderr.decode()).exists()


def test_sigterm_is_forwarded_too(kb_env, standin, tmp_path):
    server = standin()
    pids, marker = tmp_path / "pids", tmp_path / "marker"
    kb = _start_kb_run(kb_env, server.url, *launch("serve", "--pids", str(pids), "--marker", str(marker)))
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, 20, "the command to start")
        kb.terminate()
        kb.communicate(timeout=30)
    finally:
        kb.kill()
    assert kb.returncode == 128 + signal.SIGTERM
    assert "main SIGTERM" in marker.read_text()


def test_a_command_ignoring_ctrl_c_is_killed_after_the_grace_period(kb_env, standin, tmp_path):
    server = standin()
    pids = tmp_path / "pids"
    kb = _start_kb_run(kb_env, server.url, *launch("stubborn", "--pids", str(pids)), extra=("--kill-grace", "1"))
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, 20, "the command to start")
        os.killpg(kb.pid, signal.SIGINT)
        kb.communicate(timeout=30)
    finally:
        kb.kill()
    assert kb.returncode == 128 + signal.SIGKILL
    recorded = [int(p) for p in pids.read_text().split()]
    wait_until(lambda: not any(pid_alive(p) for p in recorded), 10, "the command's processes to die")
    assert server.uploads() == []


def test_death_by_signal_exits_128_plus_n_and_uploads(kb_env, standin):
    server = standin()
    done = run_kb(["run", "--server", server.url, "--", *launch("kill9")], kb_env)
    assert done.returncode == 128 + signal.SIGKILL
    assert "was killed by SIGKILL (exit status 137); uploading its log" in done.stderr.decode()
    [upload] = server.uploads()
    assert upload["fields"]["exit_code"] == "137"


def test_command_not_found(kb_env, standin):
    server = standin()
    done = run_kb(["run", "--server", server.url, "--", "no-such-launcher-xyz"], kb_env)
    assert done.returncode == 127
    assert "command not found: no-such-launcher-xyz" in done.stderr.decode()
    assert server.uploads() == []


def test_server_down_spools_then_flush_delivers_once(kb_env, standin):
    port = free_port()  # nothing listens yet
    url = f"http://127.0.0.1:{port}"
    done = run_kb(["run", "--server", url, "--", *launch("crash")], kb_env)

    assert done.returncode == 1
    stderr = done.stderr.decode()
    [entry] = spool_entries(kb_env)
    assert f"saved to the spool: {entry}" in stderr and "kb flush" in stderr
    # before it spools, the bundled knowledge base advises offline
    advice = stderr.index("Crash KB, bundled knowledge (offline): ")
    assert advice < stderr.index("saved to the spool")
    assert "Root cause\n  torch.OutOfMemoryError: CUDA out of memory" in stderr[advice:]
    assert "Recommendation: " in stderr[advice:]
    log_path = saved_log(stderr)
    assert (entry / "log").read_bytes() == log_path.read_bytes()
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["fields"]["exit_code"] == "1" and meta["idempotency_key"]
    assert "token" not in json.dumps(meta).lower()

    server = standin(port=port)
    flushed = run_kb(["flush", "--server", url], kb_env)
    assert flushed.returncode == 0, flushed.stderr
    assert f"sent {entry.name}: new incident #1 | " in flushed.stdout.decode()
    assert f"  {url}/incidents/1\n" in flushed.stdout.decode()
    [upload] = server.uploads()
    assert upload["idempotency_key"] == meta["idempotency_key"]
    assert upload["log"] == log_path.read_text()
    assert spool_entries(kb_env) == []

    again = run_kb(["flush", "--server", url], kb_env)
    assert again.returncode == 0
    assert "the spool is empty" in again.stderr.decode()
    assert len(server.uploads()) == 1  # nothing sent twice


def test_kb_server_and_token_come_from_the_environment(kb_env, standin):
    server = standin("--token", "s3cret")
    env = dict(kb_env, KB_SERVER=server.url, KB_TOKEN="s3cret")
    done = run_kb(["run", "--", *launch("crash")], env)
    assert done.returncode == 1
    [upload] = server.uploads()
    assert upload["authorization"] == "Bearer s3cret" and upload["answered"] == 201


def test_log_option_chooses_where_the_log_goes(kb_env, standin, tmp_path: Path):
    server = standin()
    target = tmp_path / "mine" / "launch.log"
    done = run_kb(["run", "--server", server.url, "--log", str(target), "--", PY, "-c", "print('hi')"], kb_env)
    assert done.returncode == 0
    assert target.read_text() == "hi\n"
    assert f"log saved to {target}" in done.stderr.decode()


def test_ctrl_c_during_the_upload_spools_the_log(kb_env, standin):
    server = standin("--delay", "20")  # records the upload, then answers far too late
    kb = _start_kb_run(kb_env, server.url, *launch("crash"))
    try:
        wait_until(lambda: server.uploads(), 30, "the upload to start")
        os.killpg(kb.pid, signal.SIGINT)
        _, stderr = kb.communicate(timeout=30)
    finally:
        kb.kill()
    assert kb.returncode == 1  # still the command's own status
    assert "upload interrupted" in stderr.decode()
    [entry] = spool_entries(kb_env)
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["idempotency_key"] == server.uploads()[0]["idempotency_key"]  # a resend is recognisable


def test_an_unwritable_log_dir_falls_back_to_a_temp_file(kb_env, standin, tmp_path):
    server = standin()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    done = run_kb(["run", "--server", server.url, "--", PY, "-c", "print('launched')"],
                  dict(kb_env, KB_LOG_DIR=str(not_a_dir)))
    assert done.returncode == 0 and done.stdout == b"launched\n"
    assert "cannot write the log to" in done.stderr.decode()
    fallback = saved_log(done.stderr.decode())
    try:
        assert fallback.read_text() == "launched\n"
    finally:
        fallback.unlink()


def test_usage_errors(kb_env):
    assert run_kb(["run", "--ready-timeout", "5", "--", "true"], kb_env).returncode == 2
    assert run_kb(["run", "--ready-url", "localhost:8000", "--", "true"], kb_env).returncode == 2
    assert run_kb(["run"], kb_env).returncode == 2
