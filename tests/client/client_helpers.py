"""Helpers for the launch-integration tests: real processes, loopback only, every wait
bounded. (A uniquely named module, so tests can import it next to other suites.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAKE_LAUNCH = HERE / "fake_launch.py"
STANDIN = HERE / "standin_server.py"
KB = [sys.executable, "-m", "kb.cli"]
GPU = "NVIDIA H100 80GB HBM3"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (dead, not yet reaped by its parent) counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class StandIn:
    """A running stand-in server process and what it recorded."""

    def __init__(self, port: int, record: Path, process: subprocess.Popen) -> None:
        self.port = port
        self.record = record
        self.process = process
        self.url = f"http://127.0.0.1:{port}"

    def uploads(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def run_kb(args: list[str], env: dict[str, str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    if "input" not in kwargs:
        kwargs["stdin"] = subprocess.DEVNULL
    return subprocess.run([*KB, *args], env=env, capture_output=True, timeout=timeout, **kwargs)


def spool_entries(env: dict[str, str]) -> list[Path]:
    root = Path(env["KB_SPOOL_DIR"])
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if not p.name.startswith("."))


def saved_log(stderr: str) -> Path:
    for line in stderr.splitlines():
        if line.startswith("kb: log saved to "):
            return Path(line.removeprefix("kb: log saved to ").strip())
    raise AssertionError(f"kb did not say where the log is:\n{stderr}")
