"""Request headers are bounded in size (KB_MAX_HEADER_KB: 431) and in time
(KB_HEADER_TIMEOUT: 408), on a real `kb serve` driven with raw sockets: an endless or
a slow header neither grows the server nor holds a connection, and other requests stay
fast meanwhile (kb/web/headerlimits.py)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import kb_serve_process

HEADER_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("headers")
    env = {**os.environ, "KB_DATABASE_URL": f"sqlite:///{tmp / 'kb.sqlite3'}", "KB_SEED": "0",
           "KB_LOG_LEVEL": "warning", "KB_HEADER_TIMEOUT": str(HEADER_TIMEOUT)}
    with kb_serve_process(env, tmp / "serve.log") as url:
        yield url


def _connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """What the server sent until it closed the connection (b"" for a bare close)."""
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return out


def _stream_header(base: str, size: int) -> tuple[bytes, float]:
    """One header `size` bytes long, sent as fast as the server reads it; the answer and
    the seconds until the server answered or closed."""
    started = time.monotonic()
    with _connect(base) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        piece = b"a" * 65536
        try:
            for _ in range(size // len(piece)):
                sock.sendall(piece)
            sock.sendall(b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed while we were still sending: the point
        return _answer(sock), time.monotonic() - started


def test_a_1_mib_header_gets_431_at_once(base):
    answer, seconds = _stream_header(base, 1 << 20)
    assert seconds < 2.0
    if answer:  # the server answers 431 and closes; a reset may swallow the answer
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert b"KB_MAX_HEADER_KB" in answer


def test_headers_over_the_limit_in_one_read_get_431(base):
    with _connect(base) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
                     + b"a" * 100_000 + b"\r\n\r\n")
        assert _answer(sock).startswith(b"HTTP/1.1 431 ")


def test_headers_under_the_limit_and_uploads_are_served(base):
    big_but_fine = "a" * 48_000
    with httpx.Client(base_url=base, timeout=30) as http:
        assert http.get("/healthz", headers={"X-Fine": big_but_fine}).status_code == 200
        # a body far larger than the header limit, its start in the headers' read
        upload = http.post("/analyze", content=b"hello\n" * 100_000,
                           headers={"Content-Type": "text/plain"})
        assert upload.status_code < 500 and upload.status_code != 431, upload.text
        # keep-alive: the next request on the same connection is bounded anew
        assert http.get("/healthz").status_code == 200


def test_healthz_stays_fast_while_endless_headers_stream_in(base):
    stop = threading.Event()
    cut: list[float] = []

    def attacker() -> None:
        while not stop.is_set():
            cut.append(_stream_header(base, 200 << 20)[1])

    threads = [threading.Thread(target=attacker) for _ in range(4)]
    for thread in threads:
        thread.start()
    latencies = []
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                started = time.monotonic()
                assert http.get("/healthz").status_code == 200
                latencies.append(time.monotonic() - started)
                time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert cut and max(cut) < 5.0, cut  # each 200 MiB stream was cut, not read to its end
    assert max(latencies) < 1.0, latencies


def test_a_slow_header_stream_is_cut_at_the_timeout(base):
    started = time.monotonic()
    answer = b""
    with _connect(base) as sock:
        sock.settimeout(0.3)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            while time.monotonic() - started < HEADER_TIMEOUT + 8:
                sock.sendall(b"X-Slow: 1\r\n")  # a header line every 0.3 s, never the end
                try:
                    chunk = sock.recv(4096)
                except TimeoutError:
                    continue
                answer += chunk
                if not chunk:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
    seconds = time.monotonic() - started
    assert HEADER_TIMEOUT - 0.5 < seconds < HEADER_TIMEOUT + 3, seconds
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]


def test_a_silent_connection_is_closed_at_the_timeout(base):
    started = time.monotonic()
    with _connect(base) as sock:
        answer = _answer(sock)
    assert HEADER_TIMEOUT - 0.5 < time.monotonic() - started < HEADER_TIMEOUT + 3
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_the_settings_are_documented(tmp_path: Path):
    from kb.config import Settings

    settings = Settings.from_env({"KB_MAX_HEADER_KB": "8", "KB_HEADER_TIMEOUT": "1.5"})
    assert (settings.max_header_kb, settings.header_timeout) == (8, 1.5)
    with pytest.raises(ValueError):
        Settings.from_env({"KB_HEADER_TIMEOUT": "0"})
