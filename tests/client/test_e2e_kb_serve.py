"""End to end against the real service: `kb serve` on SQLite, started as a process."""

from __future__ import annotations

import contextlib
import json
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from client_helpers import FAKE_LAUNCH, GPU, free_port, run_kb, saved_log, spool_entries

from tests.conftest import kb_serve_process

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("kb.web.commands") is None, reason="the service (kb.web.commands) is not built yet"
)


@pytest.fixture
def served(tmp_path) -> Iterator:
    """Starts `kb serve` on SQLite (on `port` when given) and returns its URL; every
    server started is stopped after the test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(KB_DATABASE_URL=f"sqlite:///{tmp_path / 'kb.db'}", KB_SEED="0")
    urls: list[str] = []
    with contextlib.ExitStack() as servers:

        def start(port: int | None = None) -> str:
            log = tmp_path / f"serve-{len(urls)}.log"
            urls.append(servers.enter_context(kb_serve_process(env, log, port=port)))
            return urls[-1]

        yield start


def crash_command() -> list[str]:
    return [sys.executable, str(FAKE_LAUNCH), "crash"]


def test_kb_run_against_kb_serve_reports_and_stores_the_occurrence(kb_env, served):
    url = served()
    first = run_kb(["run", "--server", url, "--", *crash_command()], kb_env)
    assert first.returncode == 1, first.stderr
    stderr = first.stderr.decode()
    assert "Crash KB: new incident" in stderr
    assert "Root cause\n  torch.OutOfMemoryError: CUDA out of memory" in stderr
    assert f"{url}/incidents/1" in stderr

    second = run_kb(["run", "--server", url, "--", *crash_command()], kb_env)
    assert second.returncode == 1
    assert "Crash KB: known incident" in second.stderr.decode()
    assert f"{url}/incidents/1" in second.stderr.decode()

    incident = httpx.get(f"{url}/incidents/1", timeout=10).json()
    assert incident["occurrence_count"] == 2
    occurrence = incident["occurrences"][0]
    assert occurrence["exit_code"] == 1 and occurrence["reporter"] == "ci-tester"
    assert occurrence["command"].endswith("fake_launch.py crash")
    assert occurrence["gpu_count"] == 2 and occurrence["gpu_name"] == GPU
    log = httpx.get(occurrence["log_url"], timeout=10).text
    assert "RuntimeError: Engine core initialization failed" in log
    assert saved_log(stderr).exists()


def test_spooled_while_kb_serve_is_down_then_flushed_once(kb_env, served):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    down = run_kb(["run", "--server", url, "--", *crash_command()], kb_env)
    assert down.returncode == 1 and len(spool_entries(kb_env)) == 1

    served(port)
    flushed = run_kb(["flush", "--server", url], kb_env)
    assert flushed.returncode == 0, flushed.stderr
    assert f"{url}/incidents/1" in flushed.stdout.decode()
    assert spool_entries(kb_env) == []
    again = run_kb(["flush", "--server", url], kb_env)
    assert again.returncode == 0
    assert httpx.get(f"{url}/incidents/1", timeout=10).json()["occurrence_count"] == 1


def test_kb_submit_against_kb_serve(kb_env, served, tmp_path):
    url = served()
    log = tmp_path / "vllm.log"
    log.write_text(
        "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] EngineCore failed to start.\n"
        "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] Traceback (most recent call last):\n"
        '(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700]   File "/usr/lib/python3/site-packages/'
        'vllm/v1/core/kv_cache_utils.py", line 700, in check_enough_kv_cache_memory\n'
        "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700]     raise ValueError(\n"
        "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] ValueError: To serve at least one request "
        "with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the "
        "available KV cache memory (9.77 GiB).\n"
    )
    done = run_kb(["submit", str(log), "--server", url], kb_env)
    assert done.returncode == 0, done.stderr
    assert "Root cause\n  ValueError: To serve at least one request" in done.stdout.decode()
    empty = tmp_path / "blank.log"
    empty.write_text("\n")
    refused = run_kb(["submit", str(empty), "--server", url], kb_env)
    # Whatever the service thinks of a blank log, the CLI answers cleanly.
    assert refused.returncode in (0, 1)
    assert "Traceback" not in refused.stderr.decode()


def test_a_resent_spool_entry_is_stored_once_by_kb_serve(kb_env, served):
    """The answer of a flush was lost (kb died before deleting the entry): the next flush
    sends the same log with the same Idempotency-Key, and the service answers the first
    upload's incident again without storing a second occurrence. The wrapper's extra
    fields are kept with the occurrence."""
    from kb.client.spool import Spool, new_idempotency_key

    url = served()
    spool = Spool(Path(kb_env["KB_SPOOL_DIR"]))
    log = b"(VllmWorker TP0 pid=7) ERROR 11-30 07:00:01 [core.py:1] ValueError: resent crash\n"
    fields = {"exit_code": "1", "failure": "exit", "cuda_visible_devices": "0,1",
              "torch_version": "2.8.0"}
    key = new_idempotency_key()
    for _ in range(2):  # the same entry twice, as after a lost answer
        spool.add(log, fields, idempotency_key=key, source="test")
        flushed = run_kb(["flush", "--server", url], kb_env)
        assert flushed.returncode == 0, flushed.stderr
        assert f"{url}/incidents/1" in flushed.stdout.decode()
        assert spool_entries(kb_env) == []
    incident = httpx.get(f"{url}/incidents/1", timeout=10).json()
    assert incident["occurrence_count"] == 1
    occurrence = incident["occurrences"][0]
    assert (occurrence["failure"], occurrence["cuda_visible_devices"], occurrence["torch_version"]) \
        == ("exit", "0,1", "2.8.0")


def test_kb_search_and_kb_show_browse_the_knowledge_base(kb_env, served, tmp_path):
    url = served()
    log = tmp_path / "vllm.log"
    log.write_text(
        "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] Traceback (most recent call last):\n"
        '(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700]   File "/usr/lib/python3/site-packages/'
        'vllm/config/parallel.py", line 300, in verify_with_model_config\n'
        "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700]     raise ValueError(\n"
        "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] ValueError: Total number of attention "
        "heads (40) must be divisible by tensor parallel size (3).\n"
    )
    assert run_kb(["submit", str(log), "--server", url], kb_env).returncode == 0

    found = run_kb(["search", "attention heads", "--server", url], kb_env)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.decode().splitlines()
    assert lines[0] == "Crash KB: 1 incident(s)"
    assert lines[1].startswith("  #1 ") and "1x" in lines[1]
    assert run_kb(["search", "nothing like this", "--server", url], kb_env).stdout.decode() == (
        "Crash KB: 0 incident(s)\n  nothing matches\n")

    shown = run_kb(["show", "1", "--server", url], kb_env)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.decode()
    assert text.startswith("Crash KB incident #1\n") and f"  {url}/incidents/1\n" in text
    assert "  ValueError: Total number of attention heads (40) must be divisible by tensor" in text
    assert "none recorded yet for this incident" in text
    as_json = run_kb(["show", "1", "--json", "--server", url], kb_env)
    assert json.loads(as_json.stdout)["occurrence_count"] == 1

    missing = run_kb(["show", "99", "--server", url], kb_env)
    assert missing.returncode == 1 and "incident 99 does not exist" in missing.stderr.decode()
    down = run_kb(["show", "1", "--server", f"http://127.0.0.1:{free_port()}"], kb_env)
    assert down.returncode == 1 and "cannot reach" in down.stderr.decode()
    assert "Traceback" not in missing.stderr.decode() + down.stderr.decode()
