"""Request headers are bounded in size and in the time they take to arrive.

uvicorn's httptools protocol has neither bound: httptools gathers a header's value by
appending to a bytes object, so a client streaming one endless header grows the worker's
memory without limit and slows every other request of that process (quadratic copying on
the event loop), and a client that sends a byte now and then (slow loris) holds its
connection forever. `BoundedHttpToolsProtocol` keeps uvicorn's C parser (and its speed)
and adds both bounds:

- size: the request line and headers of one request may take `max_header_bytes`
  (KB_MAX_HEADER_KB); more gets `431 Request Header Fields Too Large` and the connection
  is closed. Bytes are counted as they are read, so the refusal comes after at most one
  socket read past the limit, not after the client stops sending.
- time: from the connection's start (or a request's first byte) the headers must be
  complete within `header_timeout` seconds (KB_HEADER_TIMEOUT), else `408 Request
  Timeout` and the connection is closed. The body is not counted: uploads stream at the
  client's pace.
"""

from __future__ import annotations

import asyncio
import http
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

DEFAULT_MAX_HEADER_BYTES = 64 * 1024
DEFAULT_HEADER_TIMEOUT = 10.0
GRACE = 0.5  # seconds past the timeout, once: see _headers_timed_out


class HeadersTooLarge(Exception):
    """Raised from the parser's callback; uvicorn turns a callback error into its 400
    answer, which `send_400_response` below replaces with 431."""


def _error_answer(status: int, detail: str) -> bytes:
    """The service's error body ({"status_code", "detail"}, as kb/web/app.py answers),
    written straight to the socket: the request never reaches the application."""
    body = json.dumps({"status_code": status, "detail": detail}).encode()
    phrase = http.HTTPStatus(status).phrase
    return (f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_header_bytes = max_header_bytes
        self.header_timeout = header_timeout
        self._awaiting_headers = True  # until the current request's headers are complete
        self._header_bytes = 0
        self._header_timer: asyncio.TimerHandle | None = None
        self._completed_in_read = False
        self._refused = False
        self._grace_given = False

    # The time bound
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_timed_out)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if not self._awaiting_headers or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined request waits while uvicorn paused reading for the one before:
            # the wait is ours, not the client's.
            self._arm_header_timer()
            return
        if not self._grace_given:
            # uvloop runs due timers before it reads the sockets: on a loop that was
            # busy for seconds, headers that did arrive in time may still be unread.
            # One short grace lets them be read before the client is blamed.
            self._grace_given = True
            self._header_timer = self.loop.call_later(GRACE, self._headers_timed_out)
            return
        self._refuse(408, f"the request headers did not arrive within {self.header_timeout:g} s "
                          "(KB_HEADER_TIMEOUT)")

    # The size bound
    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._completed_in_read = False
        super().data_received(data)
        if self._refused or not self._awaiting_headers or self.transport.is_closing():
            return
        if not self._completed_in_read:  # this whole read was request line and headers
            self._header_bytes += len(data)
        if self._header_bytes > self.max_header_bytes:
            self._refuse(431, self._too_large_detail())

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_headers = True
        self._header_bytes = 0
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._grace_given = False
        self._cancel_header_timer()
        # Headers that completed within one read were not counted while they arrived.
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.max_header_bytes:
            self._refused = True
            raise HeadersTooLarge()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._completed_in_read = True  # what follows in this read is the next request's

    def send_400_response(self, msg: str) -> None:
        if self._refused:
            self._refuse(431, self._too_large_detail())
        else:
            super().send_400_response(msg)

    def _too_large_detail(self) -> str:
        return (f"the request headers are larger than {self.max_header_bytes // 1024} KiB "
                "(KB_MAX_HEADER_KB)")

    def _refuse(self, status: int, detail: str) -> None:
        self._refused = True
        self._cancel_header_timer()
        if not self.transport.is_closing():
            self.logger.warning("refused a request: %s", detail)
            self.transport.write(_error_answer(status, detail))
            self.transport.close()
