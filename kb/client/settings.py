"""Where the client sends logs and keeps them. One place for the client's `KB_*` variables
(flags override them), so the docs and the commands cannot drift apart."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

DEFAULT_SERVER = "http://127.0.0.1:8000"
ENV_SERVER = "KB_SERVER"  # base URL of the service (or its /incidents URL)
ENV_TOKEN = "KB_TOKEN"  # sent as `Authorization: Bearer <token>`
ENV_SPOOL_DIR = "KB_SPOOL_DIR"  # logs waiting for `kb flush`
ENV_LOG_DIR = "KB_LOG_DIR"  # every log `kb run` saves
ENV_REPORTER = "KB_REPORTER"  # who reports (default: the login name)
ENV_UPLOAD_MAX_MB = "KB_UPLOAD_MAX_MB"  # larger logs are sent as head + tail (the service's limit)
DEFAULT_UPLOAD_MAX_MB = 256  # the service's default KB_MAX_UPLOAD_MB

APP_NAME = "crash-kb"


def data_dir() -> Path:
    return Path(user_data_dir(APP_NAME, appauthor=False))


def spool_dir() -> Path:
    value = os.environ.get(ENV_SPOOL_DIR)
    return Path(value).expanduser() if value else data_dir() / "spool"


def log_dir() -> Path:
    value = os.environ.get(ENV_LOG_DIR)
    return Path(value).expanduser() if value else data_dir() / "logs"


def incidents_url(server: str) -> str:
    """Accept either the service's base URL or its `/incidents` endpoint."""
    server = server.strip().rstrip("/")
    if server.endswith("/incidents"):
        return server
    return server + "/incidents"


def base_url(server: str) -> str:
    server = server.strip().rstrip("/")
    return server.removesuffix("/incidents")


def ensure_private_dir(path: Path) -> Path:
    """Crash logs can hold prompts and paths: keep their directories to the user."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def upload_limit() -> int:
    """Bytes of log one upload may carry; a larger log is sent as its head and tail."""
    try:
        value = float(os.environ.get(ENV_UPLOAD_MAX_MB) or DEFAULT_UPLOAD_MAX_MB)
    except ValueError:
        value = DEFAULT_UPLOAD_MAX_MB
    return max(int(value * 1024 * 1024), 64 * 1024)
