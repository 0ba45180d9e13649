"""A real webhook receiver for the notification tests: an HTTP server thread on
127.0.0.1 that records what it is sent, and can be slow, failing, or not there yet."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Records every POST as (path, headers, body); `delay` seconds before answering,
    `status` the answer. `start(port)` may be called late: until then the port refuses."""

    def __init__(self, *, delay: float = 0.0, status: int = 200) -> None:
        self.delay, self.status = delay, status
        self.received: list[tuple[str, dict[str, str], Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self, port: int = 0) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                time.sleep(receiver.delay)
                with receiver._lock:
                    receiver.received.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(receiver.status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # deliveries come in concurrent batches

        self._server = Server(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def bodies(self, path: str = "/hook") -> list[Any]:
        with self._lock:
            return [body for p, _, body in self.received if p == path]


def wait_until(check: Callable[[], Any], timeout: float = 20.0, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        time.sleep(step)
