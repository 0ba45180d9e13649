"""Shared database fixtures: every storage test runs on a real SQLite file and on a real
Postgres, each test module in its own fresh database (an SQLite file, or a Postgres
schema created for the module and dropped after it).

Postgres comes from KB_TEST_POSTGRES_URL, else postgresql+psycopg://postgres@127.0.0.1:5432/test.
When nothing answers there, a throwaway cluster is started with the local initdb/pg_ctl
(as the `postgres` user when we are root: initdb refuses root) on a free loopback port in
a temp dir. When even that is impossible, Postgres tests FAIL under CI=true and are
skipped with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _pg_answers(url: str) -> str | None:
    """None when the server answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(_libpq(url), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except Exception as exc:  # any failure means "not usable"
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


class ThrowawayCluster:
    """A temporary Postgres cluster on a free loopback port (trust auth)."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        self.pg_ctl: str | None = None
        self.prefix: list[str] = []
        self.url: str | None = None

    def start(self) -> str:
        initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
        if not initdb or not pg_ctl:
            raise RuntimeError("initdb/pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin")
        self.pg_ctl = pg_ctl
        self.dir = Path(tempfile.mkdtemp(prefix="kb-pg-"))
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no `postgres` user for initdb") from None
            runuser = shutil.which("runuser")
            self.prefix = [runuser, "-u", "postgres", "--"] if runuser else []
            if not self.prefix:
                raise RuntimeError("running as root and runuser is missing")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        data, port = self.dir / "data", _free_port()
        subprocess.run([*self.prefix, initdb, "-D", str(data), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True, timeout=120)
        options = f"-p {port} -k {self.dir} -c listen_addresses=127.0.0.1 -F"
        subprocess.run([*self.prefix, pg_ctl, "-D", str(data), "-o", options, "-l",
                        str(self.dir / "log"), "-w", "-t", "60", "start"],
                       check=True, capture_output=True, timeout=90)
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE test")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"
        return self.url

    def restart(self) -> None:
        """Stop the server (fast: every connection is cut) and start it again."""
        assert self.dir is not None and self.pg_ctl is not None
        subprocess.run([*self.prefix, self.pg_ctl, "-D", str(self.dir / "data"), "-m", "fast",
                        "-l", str(self.dir / "log"), "-w", "-t", "60", "restart"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=90)

    def stop(self) -> None:
        if self.dir is None:
            return
        if self.pg_ctl:
            subprocess.run([*self.prefix, self.pg_ctl, "-D", str(self.dir / "data"), "-m",
                            "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A Postgres server URL, or fail (CI=true) / skip with the reason."""
    url = os.environ.get("KB_TEST_POSTGRES_URL") or DEFAULT_PG_URL
    why = _pg_answers(url)
    if why is None:
        yield url
        return
    cluster = ThrowawayCluster()
    try:
        url = cluster.start()
    except Exception as exc:  # report below, with both reasons
        cluster.stop()
        reason = (f"no Postgres: {url} does not answer ({why}) and a throwaway cluster "
                  f"could not start ({exc})")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield url
    finally:
        cluster.stop()


def _schema_url(base: str, schema: str) -> str:
    url = make_url(base)
    return url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)


@contextlib.contextmanager
def fresh_database_url(backend: str, tmp_dir: Path, request: pytest.FixtureRequest,
                       label: str) -> Iterator[str]:
    """A URL to an empty database of `backend`, dropped afterwards."""
    if backend == "sqlite":
        path = tmp_dir / f"{label}-{uuid.uuid4().hex[:8]}.sqlite3"
        yield f"sqlite:///{path}"
        return
    import psycopg

    base = request.getfixturevalue("postgres_url")
    schema = re.sub(r"[^a-z0-9_]", "_", f"kbt_{label[:30]}_{uuid.uuid4().hex[:8]}".lower())
    with psycopg.connect(_libpq(base), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield _schema_url(base, schema)
    finally:
        with psycopg.connect(_libpq(base), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def empty_db_url(backend: str, tmp_path_factory: pytest.TempPathFactory,
                 request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database (no tables) of the module's backend."""
    label = request.module.__name__.rsplit(".", 1)[-1]
    with fresh_database_url(backend, tmp_path_factory.mktemp("db"), request, label) as url:
        yield url


@pytest.fixture
def fresh_db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database of the module's backend for this test alone."""
    with fresh_database_url(backend, tmp_path, request, request.node.name[:20]) as url:
        yield url


@pytest.fixture(scope="module")
def migrated_db(empty_db_url: str) -> Iterator[object]:
    """A kb.db.session.Database on a migrated, module-private database."""
    from kb.db import migrate
    from kb.db.session import Database

    database = Database(empty_db_url, pool_size=4)
    migrate.upgrade(database.engine)
    try:
        yield database
    finally:
        database.dispose()


def clear_tables(database: object) -> None:
    """Empty every table. A previous test's service may still be finishing a write in a
    worker thread (a webhook delivery recording its attempt) while this runs; Postgres
    breaks such a deadlock by failing one side, and clearing again then succeeds."""
    import time

    from sqlalchemy import exc, text

    from kb.db.models import TABLES

    for attempt in range(5):
        try:
            with database.engine.begin() as conn:  # type: ignore[attr-defined]
                if conn.dialect.name == "postgresql":
                    conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
                else:
                    for table in TABLES:
                        conn.execute(text(f"DELETE FROM {table}"))
            return
        except exc.OperationalError as error:
            if "deadlock" not in str(error).lower() or attempt == 4:
                raise
            time.sleep(0.2)


@pytest.fixture
def db(migrated_db: object) -> object:
    """The module's database, emptied before each test."""
    clear_tables(migrated_db)
    return migrated_db


def wait_for_http(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer in {timeout}s ({last})")


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def free_port() -> int:
    return _free_port()


@contextlib.contextmanager
def kb_serve_process(env: dict[str, str], log_path: Path, *args: str,
                     port: int | None = None) -> Iterator[str]:
    """A real `kb serve` on a loopback port (a free one unless `port` is given; `args`
    appended to its command line); yields its base URL. Its output goes to `log_path`
    and is printed when the block fails, so a failing end-to-end test shows what the
    server said."""
    port = port or free_port()
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kb.cli", "serve", "--host", "127.0.0.1",
                                 "--port", str(port), *args],
                                cwd=Path(__file__).resolve().parents[1], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for_http(f"{base}/healthz", timeout=60, proc=proc)
            yield base
        except BaseException:
            log.flush()
            print(log_path.read_text(errors="replace")[-20000:])
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
