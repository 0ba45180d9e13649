"""Logs larger than an upload may carry: sent as head and tail, marked where cut, never
dropped; and `kb run` stays small in memory whatever its command prints."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from client_helpers import FAKE_LAUNCH, KB, spool_entries

from kb.client.excerpt import excerpt


def test_an_excerpt_keeps_whole_lines_of_the_head_and_the_tail(tmp_path):
    log = tmp_path / "big.log"
    lines = [f"INFO line {n:06d} " + "x" * 80 + "\n" for n in range(20_000)]
    lines[-1] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    log.write_text("".join(lines))
    cut = excerpt(log, 100_000, directory=tmp_path)
    text = cut.read_text()
    assert len(text.encode()) <= 100_000
    assert text.startswith(lines[0]) and text.endswith(lines[-1])
    [marker] = [line for line in text.splitlines() if line.startswith("[kb: ")]
    assert "bytes of this log were cut here" in marker and f"({log.stat().st_size} bytes in all)" in marker
    for line in text.splitlines():  # every other kept line is whole, in order
        assert line == marker or line + "\n" in lines
    assert text.index(lines[1]) < text.index(marker) < text.index(lines[-2])


# Runs a command, then writes the peak RSS (KiB) of the largest process it waited for to the
# file its first argument names. A process of its own: RUSAGE_CHILDREN of the test's process
# holds every child any earlier test waited for (a server, a browser), not kb run alone.
_PEAK_OF = ("import pathlib, resource, subprocess, sys\n"
            "code = subprocess.call(sys.argv[2:])\n"
            "pathlib.Path(sys.argv[1]).write_text(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
            "sys.exit(code)\n")


def _run(args: list[str], env: dict[str, str], timeout: float, tmp_path: Path) -> tuple[subprocess.CompletedProcess, int]:
    """`kb run ...` with its output discarded; the peak RSS (KiB) of the largest process
    it ran as (kb run itself: the fake launch's processes are smaller)."""
    peak = tmp_path / "peak-rss-kib"
    done = subprocess.run([sys.executable, "-c", _PEAK_OF, str(peak), *KB, *args], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=timeout)
    return done, int(peak.read_text())


def test_a_launch_log_over_the_limit_reaches_the_kb_as_head_and_tail(kb_env, standin, tmp_path):
    server = standin()
    env = {**kb_env, "KB_UPLOAD_MAX_MB": "1"}
    done, _ = _run(["run", "--server", server.url, "--", sys.executable, str(FAKE_LAUNCH), "crash",
                    "--flood", "24"], env, timeout=120, tmp_path=tmp_path)
    assert done.returncode == 1, done.stderr.decode()[-2000:]
    assert "sending its head and tail" in done.stderr.decode()
    [upload] = server.uploads()
    log = upload["log"]
    assert len(log.encode()) <= 1024 * 1024
    assert "vLLM API server version" in log  # the head
    assert "bytes of this log were cut here" in log
    assert "torch.OutOfMemoryError: CUDA out of memory" in log  # the crash, at the end
    assert spool_entries(kb_env) == []


def test_kb_run_memory_stays_bounded_on_a_huge_output_and_a_hang(kb_env, standin, tmp_path):
    """1 GiB of output, then a fatal line and a hang: kb run uploads the head and tail of
    what it saw (snapshot copied in chunks) and stops the command, its peak RSS far under
    200 MB. (The uploaded excerpt is bounded by KB_UPLOAD_MAX_MB.)"""
    server = standin()
    env = {**kb_env, "KB_UPLOAD_MAX_MB": "8"}
    started = time.monotonic()
    done, peak_kib = _run(["run", "--server", server.url, "--hang-timeout", "1", "--kill-grace", "2", "--",
                           sys.executable, str(FAKE_LAUNCH), "hang", "--flood", "1024"], env, timeout=600,
                          tmp_path=tmp_path)
    assert done.returncode == 124, done.stderr.decode()[-2000:]
    [upload] = server.uploads()
    assert "torch.OutOfMemoryError" in upload["log"] and "cut here" in upload["log"]
    assert peak_kib < 200 * 1024, f"peak RSS {peak_kib / 1024:.0f} MB"
    print(f"kb run on 1 GiB + hang: peak RSS {peak_kib / 1024:.0f} MB, {time.monotonic() - started:.0f} s")
    assert not list(Path(env["KB_LOG_DIR"]).glob(".kb-*"))  # snapshots and excerpts removed
