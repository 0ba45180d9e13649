"""Fixtures for the launch-integration tests (helpers live in client_helpers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from client_helpers import GPU, REPO, STANDIN, StandIn, free_port, wait_until


@pytest.fixture
def standin(tmp_path: Path) -> Iterator:
    """Factory: standin(port=None, *extra_args) starts a stand-in and waits until it answers."""
    started: list[StandIn] = []

    def start(*args: str, port: int | None = None, record: Path | None = None) -> StandIn:
        port = port or free_port()
        record = record or tmp_path / f"uploads-{port}.jsonl"
        process = subprocess.Popen(
            [sys.executable, str(STANDIN), "--port", str(port), "--record", str(record), *args],
            stdout=subprocess.DEVNULL,
        )
        server = StandIn(port, record, process)
        started.append(server)

        def healthy() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"stand-in server exited with {process.returncode}")
            try:
                return httpx.get(f"{server.url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, 15, "the stand-in server")
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def kb_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kb-cache")


@pytest.fixture
def kb_env(tmp_path: Path, kb_cache_dir: Path) -> dict[str, str]:
    """Environment for `kb`: private spool and log dirs, no inherited server settings, and
    a fake `nvidia-smi` (a real executable) reporting two H100s. The cache (compiled
    pre-filter, the bundled knowledge base's database) is shared by the session's tests."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '%s\\n' '{GPU}' '{GPU}'\n")
    smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(
        KB_SPOOL_DIR=str(tmp_path / "spool"),
        KB_LOG_DIR=str(tmp_path / "logs"),
        KB_REPORTER="ci-tester",
        KB_CACHE_DIR=str(kb_cache_dir),
        PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}",
        PYTHONPATH=str(REPO),
        CUDA_VISIBLE_DEVICES="0,1",
    )
    return env
