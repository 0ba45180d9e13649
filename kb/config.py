"""Every setting of the service in one table, read once and passed in explicitly.

Each row names the `KB_*` environment variable, the `kb serve` flag that overrides it
(flags win over the environment), the default and what it does. `docs/configuration.md`
is the same table for people; keep the two in step.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any


def default_data_dir() -> Path:
    """Where the embedded SQLite database lives when KB_DATABASE_URL is not set:
    `KB_DATA_DIR`, else the user's data dir (`~/.local/share/crash-kb` on Linux)."""
    explicit = os.environ.get("KB_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_data_dir("crash-kb", appauthor=False))
    except Exception:  # platformdirs missing or no home directory: fall back to ./var
        return Path.cwd() / "var"


def default_database_url() -> str:
    return f"sqlite:///{default_data_dir() / 'kb.sqlite3'}"


def default_seeds_dir() -> Path:
    """The repository's `seeds/` folder next to the `kb` package (editable install or a
    checkout copied into a Docker image); else `./seeds`. KB_SEEDS_DIR overrides both."""
    beside_package = Path(__file__).resolve().parent.parent / "seeds"
    if beside_package.is_dir():
        return beside_package
    return Path.cwd() / "seeds"


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected a boolean (1/0, true/false), got {value!r}")


def _tokens(value: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in value.split(",") if t.strip())


def _positive_float(value: str) -> float:
    number = float(value)
    if not number > 0:
        raise ValueError(f"expected a positive number, got {value!r}")
    return number


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(f"expected 0 or a positive integer, got {value!r}")
    return number


WEBHOOK_FORMATS = ("json", "slack")


def webhook_parts(entry: str) -> tuple[str, str]:
    """A KB_WEBHOOKS entry `[FORMAT=]URL` as (format, URL); `json` when it names none."""
    form, sep, url = entry.partition("=")
    if not sep or "://" in form:
        return "json", entry
    return form, url


def _webhooks(value: str) -> tuple[str, ...]:
    """KB_WEBHOOKS entries, each `[FORMAT=]URL` (kb.services.webhooks reads them)."""
    entries = _tokens(value)
    for entry in entries:
        form, url = webhook_parts(entry)
        if form not in WEBHOOK_FORMATS:
            raise ValueError(f"webhook format must be one of {', '.join(WEBHOOK_FORMATS)}, got {form!r}")
        if not url.startswith(("http://", "https://")):
            raise ValueError("a webhook is an http:// or https:// URL, optionally after "
                             "`json=` or `slack=`")
    return entries


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the settings table."""

    name: str  # attribute of Settings
    env: str  # environment variable
    flag: str | None  # `kb serve` option, if any
    parse: Callable[[str], Any]
    help: str
    secret: bool = False


# The one documented table. Defaults live on the Settings dataclass below.
SETTINGS: tuple[Setting, ...] = (
    Setting("database_url", "KB_DATABASE_URL", "--database-url", str,
            "SQLAlchemy URL. Default: SQLite file `kb.sqlite3` in the user's data dir "
            "(KB_DATA_DIR overrides the dir). Production: postgresql+psycopg://user@host/db.",
            secret=True),
    Setting("seed", "KB_SEED", None, _bool,
            "Load the seed knowledge base on `kb serve` when the database has no incidents. "
            "KB_SEED=0 starts empty."),
    Setting("seeds_dir", "KB_SEEDS_DIR", None, Path,
            "Folder of seed YAML files. Default: the repository's seeds/ beside the package, "
            "else ./seeds."),
    Setting("max_upload_mb", "KB_MAX_UPLOAD_MB", None, _positive_int,
            "Largest accepted log, in MiB, before and after gzip decompression (413 above)."),
    Setting("max_inflight_mb", "KB_MAX_INFLIGHT_MB", None, _positive_int,
            "MiB of upload bodies (and the room their analysis needs: a gzip body may inflate "
            "to KB_MAX_UPLOAD_MB) one service process holds at once; further uploads wait."),
    Setting("upload_queue_seconds", "KB_UPLOAD_QUEUE_SECONDS", None, _positive_float,
            "Seconds an upload waits for room under KB_MAX_INFLIGHT_MB before it gets 503 "
            "with Retry-After."),
    Setting("max_header_kb", "KB_MAX_HEADER_KB", None, _positive_int,
            "KiB the request line and headers of one request may take; more gets 431 and "
            "the connection is closed."),
    Setting("header_timeout", "KB_HEADER_TIMEOUT", None, _positive_float,
            "Seconds a client has to send a request's headers (from its connection or the "
            "request's first byte); a slower one gets 408 and is disconnected. The body is "
            "not counted."),
    Setting("api_tokens", "KB_API_TOKENS", None, _tokens,
            "Comma-separated bearer tokens. When set, every write (POST/PATCH except "
            "POST /analyze) needs `Authorization: Bearer <token>`.", secret=True),
    Setting("protect_reads", "KB_PROTECT_READS", None, _bool,
            "With KB_API_TOKENS set, require a token for reads too: every answer, page and "
            "stored log (pages sign in once; /healthz stays open). Default 0: anyone who can "
            "reach the service can read, only writes need a token."),
    Setting("public_url", "KB_PUBLIC_URL", None, str,
            "Base URL used in links the API returns (incident `url`). Default: the request's "
            "own base URL."),
    Setting("host", "KB_HOST", "--host", str, "Address `kb serve` binds."),
    Setting("allowed_hosts", "KB_ALLOWED_HOSTS", None, _tokens,
            "Host names requests may address, comma-separated (`*`: any). Default: only "
            "localhost, 127.0.0.1 and [::1] when KB_HOST is a loopback address (another "
            "site's page cannot reach the KB through a name it points at 127.0.0.1), else "
            "any. List the names a proxy on the same machine forwards."),
    Setting("port", "KB_PORT", "--port", _positive_int, "Port `kb serve` binds."),
    Setting("workers", "KB_WORKERS", "--workers", _positive_int,
            "Service processes `kb serve` runs (they share nothing but the database)."),
    Setting("match_candidates", "KB_MATCH_CANDIDATES", None, _positive_int,
            "Most stored fingerprints loaded (through indexed columns) and scored per match."),
    Setting("db_pool_size", "KB_DB_POOL_SIZE", None, _positive_int,
            "Database connections per process."),
    Setting("db_timeout", "KB_DB_TIMEOUT", None, _positive_float,
            "Seconds a request waits on the database (a frozen or saturated one) before it "
            "answers 503 with Retry-After; /healthz then says the database is unreachable. "
            "The analysis of an upload is not counted."),
    Setting("threads", "KB_THREADS", None, _positive_int,
            "Worker threads per process for analysis and database work."),
    Setting("log_level", "KB_LOG_LEVEL", None, str, "Log level of `kb serve` (debug, info, warning)."),
    Setting("webhooks", "KB_WEBHOOKS", None, _webhooks,
            "Where to send notifications (a new incident, a regression, a spike), "
            "comma-separated, each `[FORMAT=]URL`: `json=` (default) posts the event as JSON, "
            "`slack=` posts Slack-compatible `{\"text\": ...}`. Empty: no notifications.",
            secret=True),
    Setting("spike_per_hour", "KB_SPIKE_PER_HOUR", None, _non_negative_int,
            "Occurrences of one incident within an hour that make a spike notification "
            "(once per incident per hour). 0: no spike notifications."),
    Setting("webhook_timeout", "KB_WEBHOOK_TIMEOUT", None, _positive_float,
            "Seconds one webhook delivery may take (connect and answer) before it counts as "
            "failed and is retried."),
    Setting("webhook_retry_seconds", "KB_WEBHOOK_RETRY_SECONDS", None, _positive_float,
            "Seconds before the first retry of a failed delivery; each further retry waits "
            "twice as long (at most an hour)."),
    Setting("webhook_max_attempts", "KB_WEBHOOK_MAX_ATTEMPTS", None, _positive_int,
            "Delivery attempts per notification and webhook before it is given up (`failed`)."),
)


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str = field(default_factory=default_database_url)
    seed: bool = True
    seeds_dir: Path = field(default_factory=default_seeds_dir)
    max_upload_mb: int = 256
    max_inflight_mb: int = 1024
    upload_queue_seconds: float = 30.0
    max_header_kb: int = 64
    header_timeout: float = 10.0
    api_tokens: tuple[str, ...] = ()
    protect_reads: bool = False
    public_url: str | None = None
    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    port: int = 8000
    workers: int = 1
    match_candidates: int = 200
    db_pool_size: int = 10
    db_timeout: float = 5.0
    threads: int = 16
    log_level: str = "info"
    webhooks: tuple[str, ...] = ()
    spike_per_hour: int = 50
    webhook_timeout: float = 5.0
    webhook_retry_seconds: float = 10.0
    webhook_max_attempts: int = 10

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 1024 * 1024

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from `KB_*` variables, then explicit overrides (flags); None
        overrides are ignored so unset flags fall through to the environment."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            raw = environ.get(setting.env)
            if raw is None or (raw == "" and setting.name not in {"api_tokens", "seed", "webhooks"}):
                continue
            try:
                values[setting.name] = setting.parse(raw)
            except ValueError as exc:
                raise ValueError(f"{setting.env}: {exc}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The same settings as environment variables, for child processes."""
        out: dict[str, str] = {}
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            if value is None:
                continue
            if isinstance(value, bool):
                out[setting.env] = "1" if value else "0"
            elif isinstance(value, tuple):
                out[setting.env] = ",".join(value)
            else:
                out[setting.env] = str(value)
        return out

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


def describe() -> list[dict[str, str]]:
    """The settings table as rows (env, flag, default, help), e.g. for docs."""
    defaults = Settings()
    rows = []
    for setting in SETTINGS:
        default = getattr(defaults, setting.name)
        if setting.name == "database_url":
            default = "sqlite:///<data dir>/kb.sqlite3"
        elif setting.name == "seeds_dir":
            default = "<repo>/seeds"
        rows.append({"env": setting.env, "flag": setting.flag or "", "default": repr(default),
                     "help": setting.help})
    return rows


__all__ = ["SETTINGS", "Setting", "Settings", "default_database_url", "default_seeds_dir",
           "describe"]
